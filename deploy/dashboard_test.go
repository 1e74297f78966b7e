package deploy

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// panelJSON is a panel as Grafana's model has it, for checks beyond
// what Expressions reads.
type panelJSON struct {
	ID         int             `json:"id"`
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	Datasource *datasourceJSON `json:"datasource"`
	Targets    []struct {
		RefID      string          `json:"refId"`
		Expr       string          `json:"expr"`
		Datasource *datasourceJSON `json:"datasource"`
	} `json:"targets"`
	Panels  []panelJSON `json:"panels"`
	GridPos struct {
		X, Y, W, H int
	} `json:"gridPos"`
}

type datasourceJSON struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

func TestDashboardPanels(t *testing.T) {
	var d struct {
		UID        string      `json:"uid"`
		Panels     []panelJSON `json:"panels"`
		Templating struct {
			List []struct {
				Name       string          `json:"name"`
				Type       string          `json:"type"`
				Query      json.RawMessage `json:"query"`
				AllValue   string          `json:"allValue"`
				Datasource *datasourceJSON `json:"datasource"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(Dashboard(), &d); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if d.UID == "" {
		t.Error("dashboard has no uid: a re-import would make a second copy")
	}

	vars := map[string]int{}
	for i, v := range d.Templating.List {
		vars[v.Name] = i
	}
	if i, ok := vars["datasource"]; !ok || d.Templating.List[i].Type != "datasource" || string(d.Templating.List[i].Query) != `"prometheus"` {
		t.Error(`no template variable "datasource" of type datasource for prometheus`)
	}
	if i, ok := vars["route"]; !ok {
		t.Error(`no template variable "route"`)
	} else {
		v := d.Templating.List[i]
		q, err := variableQuery(v.Query)
		if err != nil || q != "label_values(tradergate_requests_total, route)" {
			t.Errorf("route variable query = %q (%v), want label_values(tradergate_requests_total, route)", q, err)
		}
		if v.AllValue != ".+" {
			t.Errorf(`route variable allValue = %q, want ".+" (Expressions puts that for $route)`, v.AllValue)
		}
		if v.Datasource == nil || v.Datasource.UID != "${datasource}" {
			t.Errorf("route variable datasource = %+v, want uid ${datasource}", v.Datasource)
		}
	}

	ids := map[int]string{}
	rows := 0
	var check func([]panelJSON)
	check = func(panels []panelJSON) {
		for _, p := range panels {
			if prev, dup := ids[p.ID]; dup {
				t.Errorf("panels %q and %q share id %d", prev, p.Title, p.ID)
			}
			ids[p.ID] = p.Title
			if p.Type == "row" {
				rows++
				check(p.Panels)
				continue
			}
			if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: datasource %+v, want uid ${datasource}", p.Title, p.Datasource)
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				if strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("panel %q target %s: empty expr", p.Title, tg.RefID)
				}
				if tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
					t.Errorf("panel %q target %s: datasource %+v, want uid ${datasource}", p.Title, tg.RefID, tg.Datasource)
				}
			}
		}
	}
	check(d.Panels)
	if rows < 10 {
		t.Errorf("%d rows, want one per concern (10)", rows)
	}
	checkLayout(t, d.Panels)
}

// checkLayout: panels fit Grafana's 24 columns and do not overlap (Grafana
// would push them about, away from their row).
func checkLayout(t *testing.T, panels []panelJSON) {
	t.Helper()
	for i, a := range panels {
		g := a.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside the 24 columns", a.Title, g)
		}
		for _, b := range panels[i+1:] {
			h := b.GridPos
			if g.X < h.X+h.W && h.X < g.X+g.W && g.Y < h.Y+h.H && h.Y < g.Y+g.H {
				t.Errorf("panels %q and %q overlap", a.Title, b.Title)
			}
		}
	}
}

// TestDashboardExpressionsNestedRows: a collapsed row keeps its panels
// inside it; they count too.
func TestDashboardExpressionsNestedRows(t *testing.T) {
	const model = `{
	  "templating": {"list": [
	    {"name": "datasource", "type": "datasource", "query": "prometheus"},
	    {"name": "route", "type": "query", "query": "label_values(up{job=\"x\"}, route)"},
	    {"name": "old", "type": "query", "query": {"query": "label_values(route)"}}
	  ]},
	  "panels": [
	    {"id": 1, "type": "row", "title": "r", "collapsed": true, "panels": [
	      {"id": 2, "type": "timeseries", "title": "inner", "targets": [{"refId": "A", "expr": "rate(a_total{route=~\"${route:regex}\"}[$__rate_interval])"}]}
	    ]},
	    {"id": 3, "type": "stat", "title": "outer", "targets": [{"refId": "B", "expr": "sum(b[$__range]) > [[route]]"}]}
	  ]}`
	got, err := dashboardExpressions([]byte(model))
	if err != nil {
		t.Fatal(err)
	}
	want := []Expr{
		{`grafana/tradergate.json: variable route`, `up{job="x"}`},
		{`grafana/tradergate.json: panel "inner" (id 2) target A`, `rate(a_total{route=~".+"}[1m])`},
		{`grafana/tradergate.json: panel "outer" (id 3) target B`, `sum(b[1h]) > .+`},
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}

func TestSubstituteRefusesUnknownVariables(t *testing.T) {
	for _, expr := range []string{`rate(x[$__rate_interval]) * $scale`, `x{plan="${plan}"}`} {
		if q, err := substitute(expr); err == nil {
			t.Errorf("substitute(%q) = %q, want an error", expr, q)
		}
	}
}
