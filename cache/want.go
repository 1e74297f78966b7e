package cache

import (
	"sync"
	"sync/atomic"
	"time"
)

// A fetch may want to know whether anyone still waits for it: the proxy's
// retry loop makes no upstream retry once the client has gone. With
// coalescing "the client" is every caller waiting on the flight, so the
// cache counts them per key and hands the fetch their abandoned.

// want counts the callers waiting on the flight of one key.
type want struct {
	refs    int       // under wants.mu: the callers and the flight holding it
	since   time.Time // when the key's first caller or flight took it (monotonic)
	waiters atomic.Int32
	had     atomic.Bool // some caller waited at some point
	// kept: a caller took the held page and left (Config.StaleAfter): the
	// fetch is the page's refresh now, which the cache itself wants.
	kept atomic.Bool
}

// wants maps keys with a flight or waiters to their want.
type wants struct {
	mu sync.Mutex
	m  map[string]*want
}

func (ws *wants) acquire(key string) *want {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.m == nil {
		ws.m = map[string]*want{}
	}
	w := ws.m[key]
	if w == nil {
		w = &want{since: time.Now()}
		ws.m[key] = w
	}
	w.refs++
	return w
}

func (ws *wants) release(key string, w *want) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w.refs--; w.refs == 0 {
		delete(ws.m, key)
	}
}

// busyFor reports how long key has had a flight running or callers
// waiting on one; ok is false when it has none.
func (ws *wants) busyFor(key string) (d time.Duration, ok bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w := ws.m[key]; w != nil {
		return time.Since(w.since), true
	}
	return 0, false
}

// wait registers one caller waiting on key's flight; waited ends its
// wait.
func (ws *wants) wait(key string) *want {
	w := ws.acquire(key)
	w.had.Store(true)
	w.waiters.Add(1)
	return w
}

// waited ends the wait of a caller that wait registered on key.
func (ws *wants) waited(key string, w *want) {
	w.waiters.Add(-1)
	ws.release(key, w)
}

// abandoned reports whether every caller that waited on the flight has
// stopped waiting (their clients went away). A background refresh that no
// caller joined is never abandoned: the cache itself wants it.
func (w *want) abandoned() bool {
	return w.had.Load() && w.waiters.Load() == 0 && !w.kept.Load()
}
