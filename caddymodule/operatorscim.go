package caddymodule

import (
	"net/http"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/handlers/scimapi"
	"github.com/tollgate-dev/caddy-tollgate/scim"
)

// An organization's SCIM token on the operator API:
//
//	POST   /tollgate/accounts/{id}/scim-token   issues (or rotates) it; the token is shown once
//	GET    /tollgate/accounts/{id}/scim-token   its label and creation time
//	DELETE /tollgate/accounts/{id}/scim-token   revokes it
//
// The identity provider calls the SCIM 2.0 service at
// <gateway>/scim/v2 with it as a bearer token. Only its SHA-256 digest is
// stored.

type operatorSCIMToken struct {
	AccountID string    `json:"account_id"`
	Label     string    `json:"label"`
	CreatedAt time.Time `json:"created_at"`
}

func newOperatorSCIMToken(t scim.Token) operatorSCIMToken {
	return operatorSCIMToken{AccountID: t.AccountID, Label: t.Label, CreatedAt: t.CreatedAt}
}

func (c *operatorCall) rotateSCIMToken() (int, any, *apierror.Error) {
	secret, t, err := scim.StoreOf(c.store).RotateToken(c.acct.ID)
	if err != nil {
		return 0, nil, c.storeError(err)
	}
	return http.StatusCreated, map[string]any{"data": newOperatorSCIMToken(t), "token": secret,
		"scim_base_path": scimapi.Prefix}, nil
}

func (c *operatorCall) showSCIMToken() (int, any, *apierror.Error) {
	t, ok := scim.StoreOf(c.store).TokenInfo(c.acct.ID)
	if !ok {
		return 0, nil, apierror.NotFound("account " + c.acct.ID + " has no SCIM token")
	}
	return http.StatusOK, dataOf(newOperatorSCIMToken(t)), nil
}

func (c *operatorCall) revokeSCIMToken() (int, any, *apierror.Error) {
	if err := scim.StoreOf(c.store).RevokeToken(c.acct.ID); err != nil {
		return 0, nil, c.storeError(err)
	}
	return http.StatusOK, map[string]any{"deleted": true}, nil
}

// scimTokenCommand is `caddy tollgate scim-token`.
func scimTokenCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "scim-token", Short: "Issues, rotates, shows and revokes an organization's SCIM token"}
	sub := func(use, short, method string) *cobra.Command {
		c := &cobra.Command{
			Use: use + " --account <id>", Short: short, Args: cobra.NoArgs,
			RunE: func(c *cobra.Command, _ []string) error {
				fl := caddycmd.Flags{FlagSet: c.Flags()}
				return operatorRequest(c, method, accountPath(fl.String("account"))+"/scim-token", nil)
			},
		}
		c.Flags().String("account", "", "Organization account ID (required)")
		mustMarkRequired(c, "account")
		return c
	}
	cmd.AddCommand(
		sub("rotate", "Issues a new SCIM token (replacing the previous one); shown once", http.MethodPost),
		sub("show", "Shows the SCIM token's label and creation time", http.MethodGet),
		sub("revoke", "Revokes the SCIM token", http.MethodDelete),
	)
	return cmd
}
