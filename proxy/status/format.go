package status

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
)

// Numbers for humans. static/status.js formats the figures it refreshes
// the same way; the two must agree, or a figure would change its look on
// the first refresh.

// fixed formats x with d decimals the way JavaScript's toFixed does, so the
// script's figures match: a tie (x exactly halfway, like 1.25 to one
// decimal) rounds away from zero, where strconv would round to even.
// Away from ties both give the correctly rounded exact value.
func fixed(x float64, d int) string {
	r := new(big.Rat)
	if math.IsInf(x, 0) || math.IsNaN(x) || r.SetFloat64(x) == nil {
		return strconv.FormatFloat(x, 'f', d, 64)
	}
	r.Mul(r, new(big.Rat).SetFloat64(math.Pow10(d)))
	if r.Denom().Cmp(big.NewInt(2)) == 0 {
		x += math.Copysign(0.5*math.Pow10(-d), x)
	}
	return strconv.FormatFloat(x, 'f', d, 64)
}

// pct formats a ratio: 0.934 is "93.4 %".
func pct(r float64) string { return fixed(r*100, 1) + " %" }

// per formats a count per something, two decimals: 0.0519 is "0.05",
// 2.5 is "2.50".
func per(x float64) string { return fixed(x, 2) }

// rate formats events per second: "0.4/s", "12.3/s", "1,234/s".
func rate(x float64) string {
	if x >= 1000 {
		return count(int64(math.Round(x))) + "/s"
	}
	return fixed(x, 1) + "/s"
}

// dur formats seconds: "850 µs", "12.5 ms", "1.25 s"; 0 is "–" (no data).
func dur(sec float64) string {
	switch {
	case sec <= 0:
		return "–"
	case sec < 0.001:
		return fixed(sec*1e6, 0) + " µs"
	case sec < 1:
		return fixed(sec*1e3, 1) + " ms"
	}
	return fixed(sec, 2) + " s"
}

// size formats a size in IEC units: "512 B", "12.3 MiB".
func size(n int64) string {
	const units = "KMGTPE"
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	v, i := float64(n)/1024, 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return fixed(v, 1) + " " + units[i:i+1] + "iB"
}

// count formats an integer with thousands separators: "12,345".
func count(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// span formats a length of time in seconds, two units at most: "42 s",
// "12 min 5 s", "4 h 12 min", "3 d 4 h".
func span(sec float64) string {
	s := int64(sec)
	switch {
	case s < 60:
		return fmt.Sprintf("%d s", s)
	case s < 3600:
		return fmt.Sprintf("%d min %d s", s/60, s%60)
	case s < 86400:
		return fmt.Sprintf("%d h %d min", s/3600, s%3600/60)
	}
	return fmt.Sprintf("%d d %d h", s/86400, s%86400/3600)
}

// ago formats how long before ref t was: "12 s ago"; "never" for zero.
func ago(t, ref time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := ref.Sub(t).Seconds()
	if d < 0 {
		d = 0
	}
	return span(d) + " ago"
}

// stamp formats a time for humans, in UTC: "2026-05-01 12:00:05 UTC".
func stamp(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format("2006-01-02 15:04:05") + " UTC"
}

// Element states: the page colours a figure ok (green), warn (amber) or bad
// (red), or leaves it plain.

func breakerState(b string) string {
	switch b {
	case breakerOpen:
		return "bad"
	case breakerHalfOpen:
		return "warn"
	case "":
		return "" // no breaker: nothing to colour
	}
	return "ok"
}

// breakerText is what the page says of a breaker: its state, or "none"
// for a route without one.
func breakerText(b string) string {
	if b == "" {
		return "none"
	}
	return b
}

func errorState(r float64) string {
	switch {
	case r >= errorRatioRed:
		return "bad"
	case r >= errorRatioAmber:
		return "warn"
	}
	return "ok"
}

func daysState(d int) string {
	switch {
	case d < certDaysRed:
		return "bad"
	case d < certDaysAmber:
		return "warn"
	}
	return "ok"
}

func storeState(s string) string {
	switch s {
	case StoreOK:
		return "ok"
	case storeDegraded:
		return "warn"
	case StoreDown:
		return "bad"
	}
	return ""
}

func boolState(ok bool) string {
	if ok {
		return "ok"
	}
	return "bad"
}
