package caddymodule

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
	"github.com/tidwall/gjson"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "tollgate",
		Usage: "<account|credits|mgmt-key|keys|usage|activity|generation|member|scim-token|signin-link|oidc|migrate> ... [--address <interface>] [--config <path> [--adapter <name>]]",
		Short: "Manages the tollgate gateway's accounts, credits and management keys",
		Long: `
Calls the operator API (the admin.api.tollgate module) of a running Caddy
instance to manage the gateway's accounts, credit purchases, management
keys and API keys, and to read usage, activity and generation records.
Commands that change something print the API's JSON answer; those that
read print a table, or the JSON answer with --json. A command exits 0 when
it succeeded and 1 otherwise (a wrong flag, an unknown account, an
unreachable admin API), with one line on standard error.

The admin API is reached at --address, or at the admin address of the
--config file (adapted with --adapter), or at Caddy's default admin address.

A key's full string is printed only once, by 'mgmt-key create' or
'keys create'; it cannot be retrieved again.

Examples:
  caddy tollgate account create --name Acme --type organization
  caddy tollgate credits add --account org_123 --amount 25
  caddy tollgate keys create --account org_123 --name ci --limit 10
  caddy tollgate usage --account org_123 --from 2026-11-01 --by week
  caddy tollgate generation gen-1764000000-abc
`,
		CobraFunc: buildTollgateCommand,
	})
}

// buildTollgateCommand sets up `caddy tollgate` and its subcommands on cmd.
func buildTollgateCommand(cmd *cobra.Command) {
	pf := cmd.PersistentFlags()
	pf.String("address", "", "The address to use to reach the admin API endpoint, if not the default")
	pf.StringP("config", "c", "", "Configuration file to use to parse the admin address, if --address is not used")
	pf.StringP("adapter", "a", "", "Name of config adapter to apply (when --config is used)")
	cmd.AddCommand(accountCommand(), creditsCommand(), mgmtKeyCommand(), keysCommand(), presetsCommand(), usageCommand(), activityCommand(),
		generationCommand(), memberCommand(), scimTokenCommand(), migrateCommand(), signInLinkCommand(), oidcCommand())
}

func accountCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "account", Short: "Creates, lists, shows and updates accounts"}

	create := &cobra.Command{
		Use:   "create --name <name> --type personal|organization [--billing <billing>] [--exempt] [--rate-limits <json>]",
		Short: "Creates an account",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			fl := caddycmd.Flags{FlagSet: c.Flags()}
			body := map[string]any{"name": fl.String("name"), "type": fl.String("type")}
			if fl.Changed("billing") {
				body["billing"] = fl.String("billing")
			}
			if fl.Changed("exempt") {
				body["rate_limit_exempt"] = fl.Bool("exempt")
			}
			if err := rateLimitsFlag(c, body); err != nil {
				return err
			}
			return operatorRequest(c, http.MethodPost, "/tollgate/accounts", body)
		},
	}
	create.Flags().String("name", "", "Account name (required)")
	create.Flags().String("type", "", "Account type: personal or organization (required)")
	create.Flags().String("billing", "", "Billing: prepaid (default), enterprise, subscription or invoiced")
	create.Flags().Bool("exempt", false, "Exempt the account from the free-model rate limits")
	create.Flags().String("rate-limits", "", `The account's rate limits, as JSON: {"requests_per_minute":60,"concurrent_requests":5,...}`)
	mustMarkRequired(create, "name", "type")

	list := &cobra.Command{
		Use:     "list [--json]",
		Short:   "Lists all accounts, oldest first, with their credits, spend and balance",
		Example: "  caddy tollgate account list\n  caddy tollgate account list --json | jq -r '.data[].id'",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			out, err := operatorAnswer(c, http.MethodGet, "/tollgate/accounts", nil)
			if err != nil {
				return err
			}
			return printTable(c, out, "data", []column{
				{"ID", "id"}, {"NAME", "name"}, {"TYPE", "type"}, {"BILLING", "billing"},
				{"CREDITS", "total_credits"}, {"SPEND", "total_usage"}, {"BALANCE", "balance"},
			})
		},
	}
	addJSONFlag(list)

	get := &cobra.Command{
		Use:   "get <account-id>",
		Short: "Shows an account",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return operatorRequest(c, http.MethodGet, accountPath(args[0]), nil)
		},
	}

	update := &cobra.Command{
		Use:   "update <account-id> [--name <name>] [--billing <billing>] [--exempt=true|false] [--rate-limits <json>]",
		Short: "Changes an account's name, billing, rate-limit exemption or rate limits",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			fl := caddycmd.Flags{FlagSet: c.Flags()}
			body := map[string]any{}
			if fl.Changed("name") {
				body["name"] = fl.String("name")
			}
			if fl.Changed("billing") {
				body["billing"] = fl.String("billing")
			}
			if fl.Changed("exempt") {
				body["rate_limit_exempt"] = fl.Bool("exempt")
			}
			if err := rateLimitsFlag(c, body); err != nil {
				return err
			}
			return operatorRequest(c, http.MethodPatch, accountPath(args[0]), body)
		},
	}
	update.Flags().String("name", "", "New account name")
	update.Flags().String("billing", "", "New billing: prepaid, enterprise, subscription or invoiced")
	update.Flags().Bool("exempt", false, "Whether the account is exempt from the free-model rate limits")
	update.Flags().String("rate-limits", "", `Rate limits to set, as JSON (a limit null: none; null: the gateway's defaults)`)

	cmd.AddCommand(create, list, get, update)
	return cmd
}

func creditsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "credits", Short: "Records and lists credit purchases"}

	add := &cobra.Command{
		Use:   "add --account <id> --amount <credits> [--note <text>]",
		Short: "Records a credit purchase",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			// The amount goes out as a JSON string so that it is not
			// rounded through a float on either side.
			fl := caddycmd.Flags{FlagSet: c.Flags()}
			body := map[string]any{"amount": fl.String("amount")}
			if fl.Changed("note") {
				body["note"] = fl.String("note")
			}
			return operatorRequest(c, http.MethodPost, accountPath(fl.String("account"))+"/credits", body)
		},
	}
	add.Flags().String("account", "", "Account ID (required)")
	add.Flags().String("amount", "", "Credits to add, as a decimal number such as 10.5 (required)")
	add.Flags().String("note", "", "Note recorded with the purchase")
	mustMarkRequired(add, "account", "amount")

	list := &cobra.Command{
		Use:   "list --account <id>",
		Short: "Lists an account's credit purchases and totals",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			fl := caddycmd.Flags{FlagSet: c.Flags()}
			return operatorRequest(c, http.MethodGet, accountPath(fl.String("account"))+"/credits", nil)
		},
	}
	list.Flags().String("account", "", "Account ID (required)")
	mustMarkRequired(list, "account")

	cmd.AddCommand(add, list)
	return cmd
}

func mgmtKeyCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "mgmt-key", Short: "Creates, lists and revokes management keys"}

	create := &cobra.Command{
		Use:   "create --account <id> --name <name> [--expires-in <duration> | --expires-at <RFC 3339 time>] [--creator-user-id <id>]",
		Short: "Creates a management key and prints its key string, once",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			fl := caddycmd.Flags{FlagSet: c.Flags()}
			body := map[string]any{"name": fl.String("name")}
			for flag, field := range map[string]string{
				"expires-in":      "expires_in",
				"expires-at":      "expires_at",
				"creator-user-id": "creator_user_id",
			} {
				if fl.Changed(flag) {
					body[field] = fl.String(flag)
				}
			}
			return operatorRequest(c, http.MethodPost, accountPath(fl.String("account"))+"/management-keys", body)
		},
	}
	create.Flags().String("account", "", "Account ID (required)")
	create.Flags().String("name", "", "Key name (required)")
	create.Flags().String("expires-in", "", "Lifetime, such as 720h")
	create.Flags().String("expires-at", "", "Expiration time in RFC 3339, such as 2030-01-02T15:04:05Z")
	create.Flags().String("creator-user-id", "", "User recorded as the key's creator")
	mustMarkRequired(create, "account", "name")
	create.MarkFlagsMutuallyExclusive("expires-in", "expires-at")

	list := &cobra.Command{
		Use:   "list [--account <id>]",
		Short: "Lists management keys, of one account or of all",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if id := (caddycmd.Flags{FlagSet: c.Flags()}).String("account"); id != "" {
				return operatorRequest(c, http.MethodGet, accountPath(id)+"/management-keys", nil)
			}
			return operatorRequest(c, http.MethodGet, "/tollgate/management-keys", nil)
		},
	}
	list.Flags().String("account", "", "Account ID; all accounts if omitted")

	revoke := &cobra.Command{
		Use:   "revoke <hash>",
		Short: "Revokes a management key; it stops working at once",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return operatorRequest(c, http.MethodDelete, "/tollgate/management-keys/"+url.PathEscape(args[0]), nil)
		},
	}

	cmd.AddCommand(create, list, revoke)
	return cmd
}

// operatorRequest calls the operator API and prints its JSON answer,
// indented, to the command's output.
func operatorRequest(c *cobra.Command, method, uri string, body any) error {
	out, err := operatorAnswer(c, method, uri, body)
	if err != nil {
		return err
	}
	return printJSON(c, out)
}

// operatorAnswer calls the operator API and returns its answer. A non-2xx
// answer becomes an error carrying the API's message, and an admin
// endpoint that cannot be reached an error that says so in one line.
func operatorAnswer(c *cobra.Command, method, uri string, body any) ([]byte, error) {
	fl := caddycmd.Flags{FlagSet: c.Flags()}
	adminAddr, err := caddycmd.DetermineAdminAPIAddress(fl.String("address"), nil, fl.String("config"), fl.String("adapter"))
	if err != nil {
		return nil, fmt.Errorf("couldn't determine admin API address: %v", err)
	}

	var reqBody io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		reqBody = bytes.NewReader(b)
	}
	resp, err := caddycmd.AdminAPIRequest(adminAddr, method, uri, nil, reqBody)
	if err != nil {
		// Caddy formats the transport's error into its own ("performing
		// request: Get ...: dial tcp ...: connect: connection refused").
		if msg, ok := strings.CutPrefix(err.Error(), "performing request: "); ok {
			return nil, fmt.Errorf("cannot reach Caddy's admin API at %s (is Caddy running? --address sets it): %s", adminAddr, msg[strings.LastIndex(msg, ": ")+2:])
		}
		return nil, operatorAPIError(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading response: %v", err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(out))
	}
	return out, nil
}

// operatorAPIError extracts the API's message from AdminAPIRequest's error,
// which embeds the response body after "HTTP <status>: ". Caddy's own
// errors are {"error":"..."}; the operator API's are {"error":{"message":...}}.
func operatorAPIError(err error) error {
	const marker = "HTTP "
	msg := err.Error()
	i := strings.Index(msg, marker)
	if i < 0 {
		return err
	}
	status, body, ok := strings.Cut(msg[i+len(marker):], ": ")
	if !ok || !gjson.Valid(body) {
		return err
	}
	e := gjson.Get(body, "error")
	if m := e.Get("message"); m.Type == gjson.String {
		return errors.New("HTTP " + status + ": " + m.Str)
	}
	if e.Type == gjson.String {
		return errors.New("HTTP " + status + ": " + e.Str)
	}
	return err
}

func accountPath(id string) string { return "/tollgate/accounts/" + url.PathEscape(id) }

// mustMarkRequired marks flags the command itself defined, so an error is
// a programming error.
func mustMarkRequired(c *cobra.Command, names ...string) {
	for _, n := range names {
		if err := c.MarkFlagRequired(n); err != nil {
			panic(err)
		}
	}
}
