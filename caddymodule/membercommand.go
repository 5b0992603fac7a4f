package caddymodule

import (
	"net/http"
	"net/url"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
)

// memberCommand is `caddy tollgate member`: an organization's members.
func memberCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "member", Short: "Creates, lists, updates and deactivates organization members"}
	path := func(account string, rest ...string) string {
		p := accountPath(account) + "/members"
		for _, r := range rest {
			p += "/" + url.PathEscape(r)
		}
		return p
	}
	fields := func(fl caddycmd.Flags, body map[string]any, names map[string]string) {
		for flag, field := range names {
			if fl.Changed(flag) {
				body[field] = fl.String(flag)
			}
		}
	}

	create := &cobra.Command{
		Use:   "create --account <id> --email <email> [--role admin|member] [--first-name N] [--last-name N]",
		Short: "Adds a member to an organization (role member by default)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			fl := caddycmd.Flags{FlagSet: c.Flags()}
			body := map[string]any{}
			fields(fl, body, map[string]string{"email": "email", "role": "role", "first-name": "first_name", "last-name": "last_name"})
			return operatorRequest(c, http.MethodPost, path(fl.String("account")), body)
		},
	}
	create.Flags().String("account", "", "Organization account ID (required)")
	create.Flags().String("email", "", "Member email (required)")
	create.Flags().String("role", "", "admin or member")
	create.Flags().String("first-name", "", "First name")
	create.Flags().String("last-name", "", "Last name")
	mustMarkRequired(create, "account", "email")

	list := &cobra.Command{
		Use:   "list --account <id>",
		Short: "Lists an organization's active members",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return operatorRequest(c, http.MethodGet, path((caddycmd.Flags{FlagSet: c.Flags()}).String("account")), nil)
		},
	}
	list.Flags().String("account", "", "Organization account ID (required)")
	mustMarkRequired(list, "account")

	update := &cobra.Command{
		Use:   "update <user-id> --account <id> [--email E] [--role admin|member] [--first-name N] [--last-name N] [--active=true|false]",
		Short: "Changes a member",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			fl := caddycmd.Flags{FlagSet: c.Flags()}
			body := map[string]any{}
			fields(fl, body, map[string]string{"email": "email", "role": "role", "first-name": "first_name", "last-name": "last_name"})
			if fl.Changed("active") {
				body["active"] = fl.Bool("active")
			}
			return operatorRequest(c, http.MethodPatch, path(fl.String("account"), args[0]), body)
		},
	}
	update.Flags().String("account", "", "Organization account ID (required)")
	update.Flags().String("email", "", "New email")
	update.Flags().String("role", "", "New role: admin or member")
	update.Flags().String("first-name", "", "New first name")
	update.Flags().String("last-name", "", "New last name")
	update.Flags().Bool("active", true, "Whether the member is active")
	mustMarkRequired(update, "account")

	deactivate := &cobra.Command{
		Use:   "deactivate <user-id> --account <id>",
		Short: "Deactivates a member and removes it from every workspace",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return operatorRequest(c, http.MethodDelete, path((caddycmd.Flags{FlagSet: c.Flags()}).String("account"), args[0]), nil)
		},
	}
	deactivate.Flags().String("account", "", "Organization account ID (required)")
	mustMarkRequired(deactivate, "account")

	cmd.AddCommand(create, list, update, deactivate)
	return cmd
}
