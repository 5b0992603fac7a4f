package caddymodule

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
	"github.com/tidwall/gjson"
)

// The commands below read an account's API keys, usage, activity and
// generations. Those that read print a table, or with --json the API's
// JSON answer; those that change something print the API's JSON answer.

// column is a table column: its heading and the answer row's field.
type column struct{ head, field string }

// printTable prints the rows at path of the JSON answer as a table, or the
// answer itself with --json.
func printTable(c *cobra.Command, answer []byte, path string, cols []column) error {
	if asJSON, _ := c.Flags().GetBool("json"); asJSON {
		return printJSON(c, answer)
	}
	tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
	heads := make([]string, len(cols))
	for i, col := range cols {
		heads[i] = col.head
	}
	fmt.Fprintln(tw, strings.Join(heads, "\t"))
	rows := gjson.GetBytes(answer, path)
	if !rows.IsArray() {
		rows = gjson.Parse("[" + rows.Raw + "]")
	}
	for _, row := range rows.Array() {
		cells := make([]string, len(cols))
		for i, col := range cols {
			v := row.Get(col.field)
			switch {
			case v.Type == gjson.Null || !v.Exists():
				cells[i] = "-"
			case v.Type == gjson.String:
				cells[i] = v.Str
			default:
				cells[i] = v.Raw
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

func addJSONFlag(c *cobra.Command) {
	c.Flags().Bool("json", false, "Print the API's JSON answer instead of a table")
}

func keysCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Lists, creates, updates, disables and deletes an account's API keys",
		Long: `Manages an account's API keys as the account's management key would
(the public API's /keys routes, with the same rules). A key's string is
printed once, by 'keys create'.`,
		Example: `  caddy tollgate keys list --account org_123
  caddy tollgate keys create --account org_123 --name ci --limit 10 --limit-reset monthly
  caddy tollgate keys update <hash> --account org_123 --limit none
  caddy tollgate keys update <hash> --account org_123 --rate-limits '{"requests_per_minute":60}'
  caddy tollgate keys disable <hash> --account org_123
  caddy tollgate keys delete <hash> --account org_123`,
	}
	path := func(c *cobra.Command, hash ...string) string {
		p := accountPath(flagString(c, "account")) + "/keys"
		for _, h := range hash {
			p += "/" + url.PathEscape(h)
		}
		return p
	}

	list := &cobra.Command{
		Use:   "list --account <id> [--include-disabled] [--json]",
		Short: "Lists an account's API keys, newest first (the first 100)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			uri := path(c)
			if b, _ := c.Flags().GetBool("include-disabled"); b {
				uri += "?include_disabled=true"
			}
			out, err := operatorAnswer(c, http.MethodGet, uri, nil)
			if err != nil {
				return err
			}
			return printTable(c, out, "data", []column{
				{"HASH", "hash"}, {"NAME", "name"}, {"LABEL", "label"}, {"DISABLED", "disabled"},
				{"LIMIT", "limit"}, {"RESET", "limit_reset"}, {"REMAINING", "limit_remaining"},
				{"USAGE", "usage"}, {"EXPIRES", "expires_at"},
			})
		},
	}
	list.Flags().Bool("include-disabled", false, "Also list disabled keys")
	addJSONFlag(list)

	create := &cobra.Command{
		Use:   "create --account <id> --name <name> [--limit <credits>] [--limit-reset daily|weekly|monthly] [--include-byok-in-limit] [--rate-limits <json>] [--expires-at <RFC 3339>]",
		Short: "Creates an API key and prints it, with its key string (shown once)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			body := map[string]any{"name": flagString(c, "name")}
			if err := keySettings(c, body); err != nil {
				return err
			}
			if c.Flags().Changed("expires-at") {
				body["expires_at"] = flagString(c, "expires-at")
			}
			return operatorRequest(c, http.MethodPost, path(c), body)
		},
	}
	create.Flags().String("name", "", "Key name (required)")
	create.Flags().String("expires-at", "", "Expiration time in RFC 3339 (UTC), such as 2030-01-02T15:04:05Z")
	keySettingFlags(create)

	update := &cobra.Command{
		Use:   "update <hash> --account <id> [--name <name>] [--limit <credits>|none] [--limit-reset daily|weekly|monthly|none] [--include-byok-in-limit=true|false] [--rate-limits <json>] [--disabled=true|false]",
		Short: "Changes an API key's name, limit, rate limits or state",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			body := map[string]any{}
			if c.Flags().Changed("name") {
				body["name"] = flagString(c, "name")
			}
			if c.Flags().Changed("disabled") {
				body["disabled"], _ = c.Flags().GetBool("disabled") // declared just above: cannot fail
			}
			if err := keySettings(c, body); err != nil {
				return err
			}
			if len(body) == 0 {
				return errors.New("nothing to update: give at least one of --name, --limit, --limit-reset, --include-byok-in-limit, --rate-limits, --disabled")
			}
			return operatorRequest(c, http.MethodPatch, path(c, args[0]), body)
		},
	}
	update.Flags().String("name", "", "New key name")
	update.Flags().Bool("disabled", false, "Whether the key is disabled")
	keySettingFlags(update)

	disable := &cobra.Command{
		Use:   "disable <hash> --account <id>",
		Short: "Disables an API key: it is refused with 401 until enabled again (keys update --disabled=false)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return operatorRequest(c, http.MethodPatch, path(c, args[0]), map[string]any{"disabled": true})
		},
	}
	del := &cobra.Command{
		Use:   "delete <hash> --account <id>",
		Short: "Deletes an API key; it stops working at once",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return operatorRequest(c, http.MethodDelete, path(c, args[0]), nil)
		},
	}
	for _, sub := range []*cobra.Command{list, create, update, disable, del} {
		sub.Flags().String("account", "", "Account ID (required)")
		mustMarkRequired(sub, "account")
		cmd.AddCommand(sub)
	}
	mustMarkRequired(create, "name")
	return cmd
}

// keySettingFlags are the flags create and update share.
func keySettingFlags(c *cobra.Command) {
	c.Flags().String("limit", "", "Spending cap in credits, such as 10.5 (none: no cap)")
	c.Flags().String("limit-reset", "", "Period of the cap: daily, weekly or monthly (none: never resets)")
	c.Flags().Bool("include-byok-in-limit", false, "Count BYOK usage against the cap")
	c.Flags().String("rate-limits", "", `Rate limits, as JSON: {"requests_per_minute":60,"concurrent_requests":5,...} (on update: the limits named change, a limit null: none; null: no limits)`)
}

// keySettings puts the key settings given as flags into body.
func keySettings(c *cobra.Command, body map[string]any) error {
	fl := c.Flags()
	if fl.Changed("limit") {
		v := flagString(c, "limit")
		switch _, err := strconv.ParseFloat(v, 64); {
		case v == "none":
			body["limit"] = nil
		case err != nil:
			return fmt.Errorf("--limit: expected a number of credits or none, got %q", v)
		default:
			body["limit"] = json.Number(v) // exact: never through a float
		}
	}
	if fl.Changed("limit-reset") {
		if v := flagString(c, "limit-reset"); v == "none" {
			body["limit_reset"] = nil
		} else {
			body["limit_reset"] = v
		}
	}
	if fl.Changed("include-byok-in-limit") {
		body["include_byok_in_limit"], _ = fl.GetBool("include-byok-in-limit") // declared just above: cannot fail
	}
	return rateLimitsFlag(c, body)
}

// rateLimitsFlag puts --rate-limits, when given, into body as the JSON it
// is; the API checks each limit and names the one it refuses.
func rateLimitsFlag(c *cobra.Command, body map[string]any) error {
	if !c.Flags().Changed("rate-limits") {
		return nil
	}
	v := flagString(c, "rate-limits")
	if !json.Valid([]byte(v)) {
		return fmt.Errorf(`--rate-limits: expected a JSON object such as {"requests_per_minute":60}, or null, got %q`, v)
	}
	body["rate_limits"] = json.RawMessage(v)
	return nil
}

func usageCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "usage --account <id> [--key <hash>] [--from <time>] [--to <time>] [--by hour|day|week|month] [--json]",
		Short: "Shows an account's or a key's spending and tokens over a range, per period and model",
		Long: `Shows an account's usage (or one key's, with --key) from --from to --to
(dates as YYYY-MM-DD, UTC, or RFC 3339 times; --to is exclusive; by default
the last 30 days), per period (--by, day by default) and model: requests,
tokens, spend and BYOK spend in credits.`,
		Example: `  caddy tollgate usage --account org_123
  caddy tollgate usage --account org_123 --key <hash> --from 2026-11-01 --to 2026-12-01 --by week
  caddy tollgate usage --account org_123 --json | jq '.data.data'`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			by := flagString(c, "by")
			query := map[string]any{
				"metrics":     []string{"request_count", "prompt_tokens", "completion_tokens", "usage", "byok_usage"},
				"dimensions":  []string{"model"},
				"granularity": by,
				"limit":       10000,
			}
			if c.Flags().Changed("from") || c.Flags().Changed("to") {
				to := time.Now().UTC()
				from := to.AddDate(0, 0, -30)
				var err error
				if from, err = timeFlag(c, "from", from); err != nil {
					return err
				}
				if to, err = timeFlag(c, "to", to); err != nil {
					return err
				}
				query["time_range"] = map[string]string{"start": from.Format(time.RFC3339Nano), "end": to.Format(time.RFC3339Nano)}
			}
			if k := flagString(c, "key"); k != "" {
				query["filters"] = []map[string]any{{"field": "api_key_id", "operator": "eq", "value": k}}
			}
			out, err := operatorAnswer(c, http.MethodPost, accountPath(flagString(c, "account"))+"/analytics/query", query)
			if err != nil {
				return err
			}
			return printTable(c, out, "data.data", []column{
				{strings.ToUpper(by), "date__" + by}, {"MODEL", "model"}, {"REQUESTS", "request_count"},
				{"PROMPT", "prompt_tokens"}, {"COMPLETION", "completion_tokens"}, {"USAGE", "usage"}, {"BYOK", "byok_usage"},
			})
		},
	}
	cmd.Flags().String("account", "", "Account ID (required)")
	cmd.Flags().String("key", "", "Only this API key (its hash)")
	cmd.Flags().String("from", "", "Start, YYYY-MM-DD (UTC) or RFC 3339 (default: 30 days ago)")
	cmd.Flags().String("to", "", "End, exclusive, YYYY-MM-DD (UTC) or RFC 3339 (default: now)")
	cmd.Flags().String("by", "day", "Period of a row: hour, day, week or month")
	addJSONFlag(cmd)
	mustMarkRequired(cmd, "account")
	return cmd
}

// timeFlag reads a date (UTC midnight) or an RFC 3339 time; def when unset.
func timeFlag(c *cobra.Command, name string, def time.Time) (time.Time, error) {
	v := flagString(c, name)
	if v == "" {
		return def, nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("--%s: expected YYYY-MM-DD or an RFC 3339 time, got %q", name, v)
	}
	return t, nil
}

func activityCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "activity --account <id> [--key <hash>] [--date YYYY-MM-DD] [--json]",
		Short: "Shows an account's or a key's activity per UTC day, model and provider (the last 30 days)",
		Long: `Shows the public API's GET /activity for an account: per UTC day of the
last 30 (or of --date alone), model and provider, the requests, tokens, spend
and BYOK spend; --key narrows it to one API key.`,
		Example: `  caddy tollgate activity --account org_123
  caddy tollgate activity --account org_123 --key <hash> --date 2026-11-24`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			q := url.Values{}
			if v := flagString(c, "key"); v != "" {
				q.Set("api_key_hash", v)
			}
			if v := flagString(c, "date"); v != "" {
				q.Set("date", v)
			}
			uri := accountPath(flagString(c, "account")) + "/activity"
			if len(q) > 0 {
				uri += "?" + q.Encode()
			}
			out, err := operatorAnswer(c, http.MethodGet, uri, nil)
			if err != nil {
				return err
			}
			return printTable(c, out, "data", []column{
				{"DATE", "date"}, {"MODEL", "model"}, {"PROVIDER", "provider_name"}, {"REQUESTS", "requests"},
				{"PROMPT", "prompt_tokens"}, {"COMPLETION", "completion_tokens"}, {"USAGE", "usage"}, {"BYOK", "byok_usage_inference"},
			})
		},
	}
	cmd.Flags().String("account", "", "Account ID (required)")
	cmd.Flags().String("key", "", "Only this API key (its hash)")
	cmd.Flags().String("date", "", "Only this UTC day, YYYY-MM-DD")
	addJSONFlag(cmd)
	mustMarkRequired(cmd, "account")
	return cmd
}

func generationCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "generation <id> [--json]",
		Short: "Shows a generation record (any account's) by its id",
		Long: `Shows the record of one request, as the public API's GET /generation
gives it to the account that made it: model, provider, tokens, cost,
status, latency. The id is the gen-... id of the answer's X-Generation-Id.`,
		Example: `  caddy tollgate generation gen-1764000000-abc
  caddy tollgate generation gen-1764000000-abc --json | jq .data.total_cost`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			out, err := operatorAnswer(c, http.MethodGet, "/tollgate/generations/"+url.PathEscape(args[0]), nil)
			if err != nil {
				return err
			}
			if asJSON, _ := c.Flags().GetBool("json"); asJSON {
				return printJSON(c, out)
			}
			// One field a line: the record is wide.
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			gjson.GetBytes(out, "data").ForEach(func(k, v gjson.Result) bool {
				s := v.String()
				if v.Type == gjson.Null {
					s = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\n", k.Str, s)
				return true
			})
			return tw.Flush()
		},
	}
	addJSONFlag(cmd)
	return cmd
}

func flagString(c *cobra.Command, name string) string {
	return caddycmd.Flags{FlagSet: c.Flags()}.String(name)
}

// printJSON prints an answer indented.
func printJSON(c *cobra.Command, out []byte) error {
	var pretty bytes.Buffer
	if json.Indent(&pretty, out, "", "  ") == nil {
		out = append(bytes.TrimRight(pretty.Bytes(), "\n"), '\n')
	}
	_, err := c.OutOrStdout().Write(out)
	return err
}
