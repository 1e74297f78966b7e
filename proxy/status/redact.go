package status

import (
	"reflect"
	"strings"
)

// redacted replaces a secret wherever a snapshot's text holds one.
const redacted = "[redacted]"

// minSecret is the shortest secret redact looks for: replacing every "a"
// because some key is "a" would wreck the page and protect nothing.
const minSecret = 8

// redact replaces every secret in every string of s, whichever field holds
// it: a walk over all of them, so a field added later is covered too.
// Secrets are searched for as they are, not in escaped forms: the page and
// the JSON escape text after this, so what they show cannot hold one.
func redact(s *Snapshot, secrets []string) {
	var list []string
	for _, sec := range secrets {
		if len(sec) >= minSecret {
			list = append(list, sec, redacted)
		}
	}
	if len(list) == 0 {
		return
	}
	r := strings.NewReplacer(list...)
	walkStrings(reflect.ValueOf(s).Elem(), r)
}

func walkStrings(v reflect.Value, r *strings.Replacer) {
	switch v.Kind() {
	case reflect.String:
		if v.CanSet() {
			v.SetString(r.Replace(v.String()))
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				walkStrings(v.Field(i), r)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			walkStrings(v.Index(i), r)
		}
	case reflect.Pointer:
		if !v.IsNil() {
			walkStrings(v.Elem(), r)
		}
	}
}
