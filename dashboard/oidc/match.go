package oidc

import (
	"net/http"
	"slices"
	"strings"

	"github.com/tollgate-dev/caddy-tollgate/scim"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// match finds the member a verified identity is, in this order:
//
//  1. the SCIM user whose externalId is the ID token's subject (the
//     provider provisioned the person under its own id);
//  2. with a verified email (email_verified) in an allowed domain: the
//     SCIM user whose userName is that email, then the member with that
//     email (one the operator or an admin added).
//
// A deactivated member (SCIM active=false, or deactivated by an admin) is
// refused, as is a person who matches no member: a provider signs people
// in, it does not create members (SCIM does).
func (s *Service) match(c Config, cl claims) (Identity, *Error) {
	acct, ok := s.store.Account(c.AccountID)
	if !ok || acct.Kind != storage.AccountOrganization {
		return Identity{}, refused(http.StatusNotFound, "no_account", "No such organization", "The organization of this sign-in no longer exists.")
	}
	users := scim.StoreOf(s.store).Users(c.AccountID)
	found := func(m storage.Member, how string) (Identity, *Error) {
		if !m.Active {
			return Identity{}, refused(http.StatusForbidden, "member_deactivated", "Your membership is deactivated",
				"Your identity provider signed you in, but your membership of "+acct.Name+" is deactivated. Ask an organization admin.")
		}
		return Identity{AccountID: m.AccountID, MemberID: m.ID, Role: m.Role, Email: m.Email, Subject: cl.Subject, Match: how}, nil
	}
	for _, u := range users {
		if u.ExternalID != nil && *u.ExternalID == cl.Subject {
			return found(u.Member, "external_id")
		}
	}
	email := strings.ToLower(strings.TrimSpace(cl.Email))
	if email == "" || !cl.verified() {
		return Identity{}, refused(http.StatusForbidden, "email_unverified", "Your email address is not verified",
			"Your identity provider signed you in but did not vouch for your email address (email_verified), which the gateway matches members by. Ask your admin.")
	}
	if len(c.AllowedDomains) > 0 {
		_, domain, _ := strings.Cut(email, "@")
		if !slices.Contains(c.AllowedDomains, domain) {
			return Identity{}, refused(http.StatusForbidden, "domain_not_allowed", "This email domain may not sign in",
				"Members of "+acct.Name+" sign in with an address at "+strings.Join(c.AllowedDomains, ", ")+".")
		}
	}
	for _, u := range users {
		// (A member without SCIM attributes shows its email as userName:
		// that is the email match below.)
		if strings.EqualFold(u.UserName, email) && u.Email != email {
			return found(u.Member, "user_name")
		}
	}
	if m, ok := s.store.MemberByEmail(c.AccountID, email); ok {
		return found(m, "email")
	}
	return Identity{}, refused(http.StatusForbidden, "unknown_member", "You are not a member of "+acct.Name,
		"Your identity provider signed you in as "+email+", but no member of "+acct.Name+" has that address. Ask an organization admin to add you.")
}
