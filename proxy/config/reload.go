package config

import (
	"reflect"
	"strings"
	"tradergate/cache"
	"tradergate/limits"
	"tradergate/proxy/native"
	"tradergate/proxy/upstream"
)

// The reload's comparison: what a reload (proxy/reload.go) cannot apply,
// named by its path in the file, so an operator is never left guessing.

// RestartOnly names, by their paths in the file, the settings that differ
// between running and next but that a reload does not apply
// (proxy.Server.Reload). Every section
// of Config is compared, so a section Reload does not know is named, never
// passed over.
func RestartOnly(running, next *Config) []string {
	var out []string
	diffFields("", reflect.ValueOf(fixedAtStart(running)), reflect.ValueOf(fixedAtStart(next)), 2, &out)
	return out
}

// fixedAtStart is c without what a reload applies: what is left takes effect
// only on restart.
func fixedAtStart(c *Config) Config {
	f := *c
	f.doc = nil // where each setting stands in the file is not a setting
	f.Keys, f.Plans, f.Legacy = nil, nil, LegacyConfig{}
	f.Upstream.Breaker = upstream.BreakerConfig{}
	// Of the native section only the shadow workers and queue are fixed.
	f.Native = native.Config{Shadow: c.Native.Shadow}
	f.Limits.AuthFailures = limits.Plan{}
	// The admin token and the login's lifetime are reloaded (proxy/admin).
	f.Admin = c.Admin.FixedAtStart()
	// Of the cache section only max_bytes is fixed (cache.SetConfig).
	f.Cache = cache.Config{MaxBytes: c.Cache.MaxBytes}
	// log.level is main's to apply; log.access is fixed.
	access := c.Log.AccessLog()
	f.Log = LogConfig{Access: &access}
	return f
}

// diffFields appends to out the yaml path of each field of the structs a
// and b that differs, descending depth levels into structs. A difference
// in fields with no name in the file (unexported, or yaml "-", such as a
// secret read from the environment) names the struct itself.
func diffFields(prefix string, a, b reflect.Value, depth int, out *[]string) {
	if reflect.DeepEqual(a.Interface(), b.Interface()) {
		return
	}
	named := len(*out)
	t := a.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		fa, fb := a.Field(i), b.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		switch {
		case name == "-" || reflect.DeepEqual(fa.Interface(), fb.Interface()):
		case name == "" && sf.Anonymous && fa.Kind() == reflect.Struct: // yaml inline
			diffFields(prefix, fa, fb, depth, out)
		case depth > 1 && fa.Kind() == reflect.Struct:
			diffFields(prefix+name+".", fa, fb, depth-1, out)
		default:
			*out = append(*out, prefix+name)
		}
	}
	if len(*out) == named && prefix != "" {
		*out = append(*out, strings.TrimSuffix(prefix, "."))
	}
}
