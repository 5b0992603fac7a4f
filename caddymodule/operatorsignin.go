package caddymodule

import (
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/dashboard"
)

// The dashboard's sign-in links on the operator API:
//
//	POST /tollgate/signin-links   {account_id, member_id, operator, expires_in, base_url, dashboard_prefix}
//
// The answer carries the link's token once; the store keeps its hash.

// defaultLinkTTL is a sign-in link's life without expires_in.
const defaultLinkTTL = 15 * time.Minute

// signInLink is the operator's view of an issued link.
type signInLink struct {
	AccountID *string   `json:"account_id"`
	MemberID  *string   `json:"member_id"`
	Role      string    `json:"role"`
	Operator  bool      `json:"operator"`
	ExpiresAt time.Time `json:"expires_at"`
}

func (c *operatorCall) createSignInLink() (int, any, *apierror.Error) {
	body, e := c.readBody("account_id", "member_id", "operator", "expires_in", "base_url", "dashboard_prefix")
	if e != nil {
		return 0, nil, e
	}
	var p dashboard.Principal
	var ok bool
	if p.AccountID, ok, e = stringField(body, "account_id"); e != nil {
		return 0, nil, e
	} else if ok && p.AccountID == "" {
		return 0, nil, apierror.BadRequest("account_id: must be a non-empty string")
	}
	if p.MemberID, ok, e = stringField(body, "member_id"); e != nil {
		return 0, nil, e
	} else if ok && p.MemberID == "" {
		return 0, nil, apierror.BadRequest("member_id: must be a non-empty string")
	}
	if p.Operator, _, e = boolField(body, "operator"); e != nil {
		return 0, nil, e
	}
	ttl := defaultLinkTTL
	if in, ok, e := stringField(body, "expires_in"); e != nil {
		return 0, nil, e
	} else if ok {
		d, err := time.ParseDuration(in)
		if err != nil || d <= 0 || d > dashboard.MaxLinkTTL {
			return 0, nil, apierror.BadRequest(`expires_in: must be a positive duration of at most 24h, such as "15m"`)
		}
		ttl = d
	}
	base, _, e := stringField(body, "base_url")
	if e != nil {
		return 0, nil, e
	}
	if base != "" && !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return 0, nil, apierror.BadRequest("base_url: must start with http:// or https://")
	}
	prefix, _, e := stringField(body, "dashboard_prefix")
	if e != nil {
		return 0, nil, e
	}
	if prefix != "" && (!strings.HasPrefix(prefix, "/") || prefix == "/") {
		return 0, nil, apierror.BadRequest("dashboard_prefix: must start with / and name a path, such as /dashboard")
	}
	token, path, link, err := dashboard.IssueLink(c.store, p, ttl, prefix)
	if err != nil {
		return 0, nil, c.storeError(err)
	}
	// Never the token: who it signs in, and until when.
	c.log.Info("dashboard sign-in link issued", zap.String("account_id", link.Principal.AccountID),
		zap.String("member_id", link.Principal.MemberID), zap.Bool("operator", link.Principal.Operator),
		zap.Time("expires_at", link.ExpiresAt))
	view := signInLink{Role: string(link.Principal.Role), Operator: link.Principal.Operator, ExpiresAt: link.ExpiresAt}
	if id := link.Principal.AccountID; id != "" {
		view.AccountID = &id
	}
	if id := link.Principal.MemberID; id != "" {
		view.MemberID = &id
	}
	return http.StatusCreated, struct {
		Data  signInLink `json:"data"`
		Token string     `json:"token"`
		Path  string     `json:"path"`
		URL   string     `json:"url,omitempty"`
	}{view, token, path, joinURL(base, path)}, nil
}

func joinURL(base, path string) string {
	if base == "" {
		return ""
	}
	return strings.TrimSuffix(base, "/") + path
}

// OperatorHandler is the operator API's handler for this app, called in
// process by the dashboard's operator pages (dashboard.OperatorAPI).
func (a *App) OperatorHandler() http.Handler {
	o := &OperatorAPI{running: func() *App { return a }, log: a.logger.Named("operator")}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _ = o.serveHTTP(w, r) })
}

func signInLinkCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "signin-link [--account <id>] [--member <user id>] [--operator] [--expires-in 15m] [--base-url URL]",
		Short: "Issues a one-time sign-in link to the dashboard (printed once)",
		Long: `Issues a sign-in link to the dashboard for a person of an account: its
owner (no --member), or an organization's member (--member, with the
member's role). --operator adds the operator pages (every account, credit
top-ups); with --operator alone the link signs in to the operator pages
only. The link works once, until it expires (default 15m, at most 24h);
only its hash is stored.`,
		Example: `  caddy tollgate signin-link --account org_123
  caddy tollgate signin-link --account org_123 --member user_abc --base-url https://gateway.example.com
  caddy tollgate signin-link --operator`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			body := map[string]any{}
			if c.Flags().Changed("account") {
				body["account_id"] = flagString(c, "account")
			}
			if c.Flags().Changed("member") {
				body["member_id"] = flagString(c, "member")
			}
			if op, _ := c.Flags().GetBool("operator"); op {
				body["operator"] = true
			}
			body["expires_in"] = flagString(c, "expires-in")
			body["base_url"] = flagString(c, "base-url")
			if c.Flags().Changed("prefix") {
				body["dashboard_prefix"] = flagString(c, "prefix")
			}
			out, err := operatorAnswer(c, http.MethodPost, "/tollgate/signin-links", body)
			if err != nil {
				return err
			}
			return printJSON(c, out)
		},
	}
	cmd.Flags().String("account", "", "The account to sign in to")
	cmd.Flags().String("member", "", "The organization member (user id) who signs in; default: the account's owner")
	cmd.Flags().Bool("operator", false, "Also grant the operator pages")
	cmd.Flags().String("expires-in", "15m", "How long the link stays valid (at most 24h)")
	cmd.Flags().String("base-url", "http://localhost:8080", "The gateway's address as people reach it, for the printed url")
	cmd.Flags().String("prefix", dashboard.DefaultPrefix, "The dashboard's path prefix (tollgate_dashboard's)")
	return cmd
}
