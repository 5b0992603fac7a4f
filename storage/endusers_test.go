package storage

import (
	"testing"
	"time"
)

func TestEndUserSetActive(t *testing.T) {
	at := time.Date(2026, 11, 23, 1, 2, 3, 0, time.FixedZone("x", 3600))
	u := EndUser{Active: true}
	u.SetActive(false, at)
	if u.Active || u.DeactivatedAt == nil || !u.DeactivatedAt.Equal(at) || u.DeactivatedAt.Location() != time.UTC {
		t.Fatalf("deactivated: %+v", u)
	}
	stamp := u.DeactivatedAt
	u.SetActive(false, at.Add(time.Hour))
	if u.DeactivatedAt != stamp {
		t.Errorf("deactivating again moved the stamp to %v", u.DeactivatedAt)
	}
	u.SetActive(true, at)
	if !u.Active || u.DeactivatedAt != nil {
		t.Errorf("activated: %+v", u)
	}
}
