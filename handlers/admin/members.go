package admin

import (
	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// memberView is an organization member as GET /organization/members
// lists it.
type memberView struct {
	ID        string  `json:"id"`
	Email     string  `json:"email"`
	FirstName *string `json:"first_name"`
	LastName  *string `json:"last_name"`
	Role      string  `json:"role"`
}

// NewMemberView is the public shape of a member (also used by the operator
// API).
func NewMemberView(m storage.Member) any {
	return memberView{ID: m.ID, Email: m.Email, FirstName: m.FirstName, LastName: m.LastName, Role: string(m.Role)}
}

// listMembers answers GET /organization/members: the organization's active
// members, oldest first, paged by offset and limit. A personal account has
// no organization: 404.
func (ar *adminRequest) listMembers() *apierror.Error {
	if _, apiErr := ar.orgAccount(); apiErr != nil {
		return apiErr
	}
	offset, limit, apiErr := ar.page()
	if apiErr != nil {
		return apiErr
	}
	all := ar.store.Members(ar.id.AccountID)
	writePage(ar.w, all, offset, limit, NewMemberView)
	return nil
}
