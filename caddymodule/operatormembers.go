package caddymodule

import (
	"net/http"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// Organization members on the operator API:
//
//	GET, POST          /tollgate/accounts/{id}/members
//	GET, PATCH, DELETE /tollgate/accounts/{id}/members/{user id}
//
// DELETE deactivates the member (its id stays on its keys and
// assignments); creating a deactivated member's email again reactivates it.

// operatorMember is the operator's view of a member.
type operatorMember struct {
	ID        string    `json:"id"`
	AccountID string    `json:"account_id"`
	Email     string    `json:"email"`
	FirstName *string   `json:"first_name"`
	LastName  *string   `json:"last_name"`
	Role      string    `json:"role"`
	Active    bool      `json:"active"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

func newOperatorMember(m storage.Member) operatorMember {
	return operatorMember{ID: m.ID, AccountID: m.AccountID, Email: m.Email, FirstName: m.FirstName,
		LastName: m.LastName, Role: string(m.Role), Active: m.Active, CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt}
}

func (c *operatorCall) listMembers() (int, any, *apierror.Error) {
	ms := c.store.Members(c.acct.ID)
	out := make([]operatorMember, len(ms))
	for i, m := range ms {
		out[i] = newOperatorMember(m)
	}
	return http.StatusOK, dataOf(out), nil
}

func (c *operatorCall) deactivateMember() (int, any, *apierror.Error) {
	d, err := c.store.DeactivateMember(c.member.AccountID, c.member.ID)
	if err != nil {
		return 0, nil, c.storeError(err)
	}
	return http.StatusOK, dataOf(newOperatorMember(d)), nil
}

// nullableString reads a string-or-null field: present, and nil for null.
func nullableString(body gjson.Result, field string) (*string, bool, *apierror.Error) {
	v := body.Get(field)
	switch v.Type {
	case gjson.Null:
		if v.Exists() {
			return nil, true, nil
		}
		return nil, false, nil
	case gjson.String:
		if e := reqbody.CheckTextField(field, v); e != nil {
			return nil, false, e
		}
		s := v.Str
		return &s, true, nil
	}
	return nil, false, apierror.BadRequest(field + ": must be a string or null")
}

func roleField(body gjson.Result) (*storage.MemberRole, *apierror.Error) {
	s, ok, e := stringField(body, "role")
	if e != nil || !ok {
		return nil, e
	}
	r, valid := storage.ParseMemberRole(s)
	if !valid {
		return nil, apierror.BadRequest("role: must be admin or member")
	}
	return &r, nil
}

func (c *operatorCall) createMember(accountID string) (int, any, *apierror.Error) {
	body, e := c.readBody("email", "role", "first_name", "last_name")
	if e != nil {
		return 0, nil, e
	}
	email, ok, e := stringField(body, "email")
	if e != nil {
		return 0, nil, e
	}
	if !ok {
		return 0, nil, apierror.BadRequest("email: required")
	}
	n := storage.NewMember{AccountID: accountID, Email: email}
	role, e := roleField(body)
	if e != nil {
		return 0, nil, e
	}
	if role != nil {
		n.Role = *role
	}
	if n.FirstName, _, e = nullableString(body, "first_name"); e != nil {
		return 0, nil, e
	}
	if n.LastName, _, e = nullableString(body, "last_name"); e != nil {
		return 0, nil, e
	}
	m, err := c.store.CreateMember(n)
	if err != nil {
		return 0, nil, c.storeError(err)
	}
	return http.StatusCreated, dataOf(newOperatorMember(m)), nil
}

func (c *operatorCall) updateMember(m storage.Member) (int, any, *apierror.Error) {
	body, e := c.readBody("email", "role", "first_name", "last_name", "active")
	if e != nil {
		return 0, nil, e
	}
	var u storage.MemberUpdate
	if email, ok, e := stringField(body, "email"); e != nil {
		return 0, nil, e
	} else if ok {
		u.Email = &email
	}
	if u.Role, e = roleField(body); e != nil {
		return 0, nil, e
	}
	if first, ok, e := nullableString(body, "first_name"); e != nil {
		return 0, nil, e
	} else if ok {
		u.FirstName = &first
	}
	if last, ok, e := nullableString(body, "last_name"); e != nil {
		return 0, nil, e
	} else if ok {
		u.LastName = &last
	}
	if active, ok, e := boolField(body, "active"); e != nil {
		return 0, nil, e
	} else if ok {
		u.Active = &active
	}
	updated, err := c.store.UpdateMember(m.AccountID, m.ID, u)
	if err != nil {
		return 0, nil, c.storeError(err)
	}
	return http.StatusOK, dataOf(newOperatorMember(updated)), nil
}
