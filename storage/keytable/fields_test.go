package keytable

import (
	"reflect"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/storage/record"
)

// everyField sets every field of v, recursively, to a value that is not
// zero.
func everyField(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	if v.Type() == reflect.TypeFor[time.Time]() {
		v.Set(reflect.ValueOf(time.Date(2026, 11, 29, 1, 2, 3, 456789, time.UTC)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("x-" + path)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(len(path)) + 7)
	case reflect.Uint64:
		v.SetUint(uint64(len(path)) + 9)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		everyField(t, v.Elem(), path)
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				everyField(t, v.Field(i), path+"."+f.Name)
			}
		}
	default:
		t.Fatalf("%s: no value for a %s: teach everyField one", path, v.Type())
	}
}

// TestKeyTableKeepsEveryField: a key with every field set reads back
// whole. The table's slot and cold part are laid out by hand: a field
// added to record.APIKey and not stored there fails here.
func TestKeyTableKeepsEveryField(t *testing.T) {
	for _, hash := range []string{"", "odd hash"} {
		var k record.APIKey
		everyField(t, reflect.ValueOf(&k).Elem(), "key")
		if hash == "" {
			k.Hash = hashSecret("sk")
		} else {
			k.Hash = hash
		}
		tab := New()
		tab.Put(&k)
		got, ok := tab.Get(k.Hash)
		if !ok || !reflect.DeepEqual(got, k) {
			t.Fatalf("the table read back\n %+v\nfrom\n %+v", got, k)
		}
	}
}
