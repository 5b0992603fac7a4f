package caddymodule

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/dashboard/oidc"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// An organization's identity provider for the dashboard's sign-in, on the
// operator API:
//
//	PUT    /tollgate/accounts/{id}/oidc   sets it (issuer, client_id, client_secret, allowed_email_domains)
//	GET    /tollgate/accounts/{id}/oidc   shows it (the secret as a masked label)
//	DELETE /tollgate/accounts/{id}/oidc   removes it
//
// PUT checks the provider's discovery document before storing anything;
// the client secret is sealed with byok_encryption_key and never shown.

func (c *operatorCall) setOIDC() (int, any, *apierror.Error) {
	body, e := c.readBody("issuer", "client_id", "client_secret", "allowed_email_domains")
	if e != nil {
		return 0, nil, e
	}
	var in oidc.Settings
	for _, f := range []struct {
		name string
		dst  *string
	}{{"issuer", &in.Issuer}, {"client_id", &in.ClientID}, {"client_secret", &in.ClientSecret}} {
		if *f.dst, _, e = stringField(body, f.name); e != nil {
			return 0, nil, e
		}
	}
	switch v := body.Get("allowed_email_domains"); {
	case v.Type == gjson.Null:
	case v.IsArray():
		for _, d := range v.Array() {
			if d.Type != gjson.String {
				return 0, nil, apierror.BadRequest("allowed_email_domains: must be an array of domain names")
			}
			in.AllowedDomains = append(in.AllowedDomains, d.Str)
		}
	default:
		return 0, nil, apierror.BadRequest("allowed_email_domains: must be an array of domain names")
	}
	cfg, created, err := oidc.Configure(c.r.Context(), c.store, c.acct.ID, in, c.app.BYOKSealer(), oidc.NewHTTPClient())
	var fe *oidc.FieldError
	switch {
	case errors.As(err, &fe):
		return 0, nil, apierror.BadRequest(fe.Error())
	case errors.Is(err, oidc.ErrNoSealer):
		return 0, nil, apierror.BadRequest(oidc.MsgNoSealer)
	case err != nil:
		return 0, nil, c.storeError(err)
	}
	c.log.Info("identity provider set", zap.String("account_id", cfg.AccountID), zap.String("issuer", cfg.Issuer))
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return status, dataOf(cfg.View()), nil
}

func (c *operatorCall) showOIDC() (int, any, *apierror.Error) {
	cfg, ok := oidc.StoreOf(c.store).Config(c.acct.ID)
	if !ok {
		return 0, nil, apierror.NotFound("account " + c.acct.ID + " has no identity provider")
	}
	return http.StatusOK, dataOf(cfg.View()), nil
}

func (c *operatorCall) deleteOIDC() (int, any, *apierror.Error) {
	if err := oidc.StoreOf(c.store).Delete(c.acct.ID); err != nil {
		if err == storage.ErrNotFound {
			return 0, nil, apierror.NotFound("account " + c.acct.ID + " has no identity provider")
		}
		return 0, nil, c.storeError(err)
	}
	c.log.Info("identity provider removed", zap.String("account_id", c.acct.ID))
	return http.StatusOK, map[string]any{"deleted": true}, nil
}

// oidcCommand is `caddy tollgate oidc`.
func oidcCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "oidc", Short: "Sets, shows and removes an organization's identity provider for the dashboard's sign-in"}
	path := func(c *cobra.Command) string {
		return accountPath((caddycmd.Flags{FlagSet: c.Flags()}).String("account")) + "/oidc"
	}
	set := &cobra.Command{
		Use:   "set --account <id> --issuer <url> --client-id <id> [--client-secret <secret> | --client-secret-file <path|->] [--allowed-email-domain <domain>]...",
		Short: "Sets the organization's OpenID Connect provider (its discovery document is checked first)",
		Example: "  caddy tollgate oidc set --account org_123 --issuer https://acme.okta.com \\\n" +
			"    --client-id 0oa1tollgate --client-secret-file /run/secrets/oidc --allowed-email-domain acme.com",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			fl := caddycmd.Flags{FlagSet: c.Flags()}
			body := map[string]any{"issuer": fl.String("issuer"), "client_id": fl.String("client-id")}
			secret, err := secretFlag(c)
			if err != nil {
				return err
			}
			if secret != "" {
				body["client_secret"] = secret
			}
			if fl.Changed("allowed-email-domain") {
				domains, _ := c.Flags().GetStringArray("allowed-email-domain")
				body["allowed_email_domains"] = domains
			}
			return operatorRequest(c, http.MethodPut, path(c), body)
		},
	}
	set.Flags().String("account", "", "Organization account ID (required)")
	set.Flags().String("issuer", "", "The provider's issuer URL, https (required)")
	set.Flags().String("client-id", "", "The gateway's client id at the provider (required)")
	set.Flags().String("client-secret", "", "The client secret (kept when omitted on a later set)")
	set.Flags().String("client-secret-file", "", "Read the client secret from this file (- for standard input)")
	set.Flags().StringArray("allowed-email-domain", nil, "Only people with an email at this domain may be matched by email (repeat for several)")
	mustMarkRequired(set, "account", "issuer", "client-id")
	sub := func(use, short, method string) *cobra.Command {
		c := &cobra.Command{Use: use + " --account <id>", Short: short, Args: cobra.NoArgs,
			RunE: func(c *cobra.Command, _ []string) error { return operatorRequest(c, method, path(c), nil) }}
		c.Flags().String("account", "", "Organization account ID (required)")
		mustMarkRequired(c, "account")
		return c
	}
	cmd.AddCommand(set,
		sub("show", "Shows the organization's identity provider (the secret masked)", http.MethodGet),
		sub("delete", "Removes the organization's identity provider: its members no longer sign in through it", http.MethodDelete))
	return cmd
}

// secretFlag reads --client-secret or --client-secret-file (not both).
func secretFlag(c *cobra.Command) (string, error) {
	fl := caddycmd.Flags{FlagSet: c.Flags()}
	if fl.Changed("client-secret") && fl.Changed("client-secret-file") {
		return "", fmt.Errorf("--client-secret and --client-secret-file cannot be combined")
	}
	if !fl.Changed("client-secret-file") {
		return fl.String("client-secret"), nil
	}
	name := fl.String("client-secret-file")
	var b []byte
	var err error
	if name == "-" {
		b, err = io.ReadAll(io.LimitReader(c.InOrStdin(), 4096))
	} else {
		b, err = os.ReadFile(name)
	}
	if err != nil {
		return "", fmt.Errorf("reading the client secret: %v", err)
	}
	return strings.TrimSpace(string(b)), nil
}
