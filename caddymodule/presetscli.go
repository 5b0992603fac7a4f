package caddymodule

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"
)

func presetsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "presets",
		Short: "Lists, shows, makes and disables an account's presets",
		Long: `Manages an account's presets as the account's management key would
(the public API's /presets routes, with the same rules): 'presets put'
makes a preset, or its next version, from a chat completions body.`,
		Example: `  caddy tollgate presets list --account org_123
  caddy tollgate presets show triage --account org_123
  caddy tollgate presets put triage --account org_123 --body '{"model":"openai/gpt-4o","temperature":0.2}'
  caddy tollgate presets status triage --account org_123 --status disabled`,
	}
	path := func(c *cobra.Command, rest ...string) string {
		p := accountPath(flagString(c, "account")) + "/presets"
		for i, r := range rest {
			if i == 0 {
				r = url.PathEscape(r)
			}
			p += "/" + r
		}
		return p
	}
	list := &cobra.Command{
		Use:   "list --account <id> [--json]",
		Short: "Lists an account's presets, most recently updated first (the first 100)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			out, err := operatorAnswer(c, http.MethodGet, path(c)+"?limit=100", nil)
			if err != nil {
				return err
			}
			return printTable(c, out, "data", []column{
				{"SLUG", "slug"}, {"NAME", "name"}, {"STATUS", "status"}, {"WORKSPACE", "workspace_id"}, {"UPDATED", "updated_at"},
			})
		},
	}
	addJSONFlag(list)
	show := &cobra.Command{
		Use:   "show <slug> --account <id>",
		Short: "Prints a preset with its designated version",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return operatorRequest(c, http.MethodGet, path(c, args[0]), nil)
		},
	}
	put := &cobra.Command{
		Use:   "put <slug> --account <id> --body <chat completions JSON>",
		Short: "Makes a preset, or its next version, from a chat completions body",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			var body map[string]any
			if err := json.Unmarshal([]byte(flagString(c, "body")), &body); err != nil || body == nil {
				return errors.New("--body: expected a JSON object")
			}
			return operatorRequest(c, http.MethodPost, path(c, args[0], "chat/completions"), body)
		},
	}
	put.Flags().String("body", "", "The chat completions body (model, parameters, a system message)")
	mustMarkRequired(put, "body")
	status := &cobra.Command{
		Use:   "status <slug> --account <id> --status active|disabled|archived",
		Short: "Sets a preset's status: only an active preset serves requests",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return operatorRequest(c, http.MethodPatch, path(c, args[0]), map[string]any{"status": flagString(c, "status")})
		},
	}
	status.Flags().String("status", "", "active, disabled or archived")
	mustMarkRequired(status, "status")
	for _, sub := range []*cobra.Command{list, show, put, status} {
		sub.Flags().String("account", "", "Account ID (required)")
		mustMarkRequired(sub, "account")
		cmd.AddCommand(sub)
	}
	return cmd
}
