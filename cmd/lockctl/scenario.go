package main

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"math/rand"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// builtinScenarios are the scenario files `lockctl load NAME` finds by
// name; a path to a file of the user's works as well.
//
//go:embed scenarios/*.json
var builtinScenarios embed.FS

// scenario is what a load run does: a JSON file, see scenarios/.
type scenario struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Mode is "mutex" (each handle loops: Lock, hold, Unlock, think) or
	// "http" (each worker serves HTTP behind locker.Middleware and sends
	// itself requests at an open-loop rate).
	Mode    string `json:"mode"`
	Workers int    `json:"workers"` // worker processes
	Handles int    `json:"handles"` // goroutines per worker, each with its own handles
	// Names is the number of lock names; 0 gives every handle a name of
	// its own (no contention).
	Names int `json:"names"`
	// Zipf, when above 1, picks names with a Zipf distribution of that
	// exponent; else uniformly.
	Zipf     float64  `json:"zipf,omitempty"`
	Hold     duration `json:"hold"`
	Think    duration `json:"think,omitempty"`
	TTL      duration `json:"ttl"`
	Duration duration `json:"duration"`
	// Fenced makes every hold write to a fenced resource, which refuses a
	// token below one it has accepted.
	Fenced bool   `json:"fenced,omitempty"`
	Fault  *fault `json:"fault,omitempty"`
	// Rate is the total request rate of mode http, per second.
	Rate float64 `json:"rate,omitempty"`
}

// fault is what the coordinator does to worker processes while they run.
type fault struct {
	// Kinds are applied in turn: "kill" (SIGKILL, and a new worker takes
	// its place) or "stop" (SIGSTOP for Stop, then SIGCONT).
	Kinds []string `json:"kinds"`
	Every duration `json:"every"` // between the end of one fault and the next
	Stop  duration `json:"stop,omitempty"`
}

// duration is a time.Duration written as "1.5s" in JSON.
type duration time.Duration

func (d duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"1.5s\": %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("bad duration %q (want e.g. 500ms, 30s)", s)
	}
	*d = duration(v)
	return nil
}

func (d duration) std() time.Duration { return time.Duration(d) }

// scenarioNames lists the built-in scenarios.
func scenarioNames() []string {
	ents, _ := fs.ReadDir(builtinScenarios, "scenarios")
	var names []string
	for _, e := range ents {
		names = append(names, strings.TrimSuffix(e.Name(), ".json"))
	}
	return names
}

// loadScenario reads a built-in scenario by name, else the file at arg.
func loadScenario(arg string) (*scenario, error) {
	b, err := builtinScenarios.ReadFile(path.Join("scenarios", arg+".json"))
	if err != nil {
		if b, err = os.ReadFile(arg); err != nil {
			return nil, fmt.Errorf("no built-in scenario %q (built in: %s) and no such file", arg, strings.Join(scenarioNames(), ", "))
		}
	}
	var s scenario
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("scenario %s: %v", arg, err)
	}
	if s.Name == "" {
		s.Name = strings.TrimSuffix(path.Base(arg), ".json")
	}
	return &s, nil
}

// validate checks a scenario after the flags have changed it.
func (s *scenario) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("scenario %s: "+format, append([]any{s.Name}, args...)...)
	}
	switch {
	case s.Mode != "mutex" && s.Mode != "http":
		return bad("mode %q (want mutex or http)", s.Mode)
	case s.Workers < 1 || s.Workers > 256:
		return bad("workers %d (want 1 to 256)", s.Workers)
	case s.Handles < 1 || s.Handles > 1000:
		return bad("handles %d (want 1 to 1000)", s.Handles)
	case s.Names < 0 || s.Names > 1_000_000:
		return bad("names %d (want 0 to 1000000)", s.Names)
	case s.Zipf != 0 && s.Zipf <= 1:
		return bad("zipf %v (want 0, uniform, or an exponent above 1)", s.Zipf)
	case s.Hold < 0 || s.Think < 0:
		return bad("negative hold or think")
	case s.TTL.std() < 10*time.Millisecond:
		return bad("ttl %v (want at least 10ms)", s.TTL.std())
	case s.Duration <= 0 || s.Duration.std() > 24*time.Hour:
		return bad("duration %v (want above 0, at most 24h)", s.Duration.std())
	case s.Mode == "http" && (s.Rate <= 0 || s.Rate > 100_000):
		return bad("rate %v (mode http wants 0 < rate <= 100000)", s.Rate)
	case s.Mode == "http" && s.Names == 0:
		return bad("mode http needs names > 0")
	}
	if f := s.Fault; f != nil {
		if len(f.Kinds) == 0 || f.Every <= 0 {
			return bad("a fault needs kinds and every")
		}
		for _, k := range f.Kinds {
			if k != "kill" && k != "stop" {
				return bad("fault kind %q (want kill or stop)", k)
			}
		}
		if slices.Contains(f.Kinds, "stop") && f.Stop <= 0 {
			return bad("fault kind stop needs stop (how long)")
		}
		if s.Names != 1 {
			return bad("faults need names = 1 (the victim is the next holder of that name)")
		}
	}
	return nil
}

// nameOf is the lock name of index i in run id.
func nameOf(run string, i int) string { return "lockctl-load/" + run + "/" + strconv.Itoa(i) }

// picker chooses the names a handle takes.
type picker struct {
	s    *scenario
	own  int // the handle's own name, when Names is 0
	rng  *rand.Rand
	zipf *rand.Zipf
}

func newPicker(s *scenario, worker, handle int, seed int64) *picker {
	p := &picker{s: s, own: worker*s.Handles + handle, rng: rand.New(rand.NewSource(seed))}
	if s.Zipf > 1 && s.Names > 1 {
		p.zipf = rand.NewZipf(p.rng, s.Zipf, 1, uint64(s.Names-1))
	}
	return p
}

func (p *picker) next() int {
	switch {
	case p.s.Names == 0:
		return p.own
	case p.zipf != nil:
		return int(p.zipf.Uint64())
	}
	return p.rng.Intn(p.s.Names)
}

// sessionURL adds the scenario's TTL to a URL of a session-based backend
// (etcd's session_ttl, whole seconds; ZooKeeper's session_timeout), where
// the session, not the hold's TTL, decides when a dead owner's hold ends.
// A URL that sets them already is left alone.
func sessionURL(u string, ttl time.Duration) string {
	add := func(param, v string) string {
		if strings.Contains(u, param+"=") {
			return u
		}
		sep := "?"
		if strings.Contains(u, "?") {
			sep = "&"
		}
		return u + sep + param + "=" + v
	}
	switch {
	case strings.HasPrefix(u, "etcd://"):
		return add("session_ttl", strconv.Itoa(int(math.Ceil(ttl.Seconds())))+"s")
	case strings.HasPrefix(u, "zk://"):
		return add("session_timeout", ttl.String())
	}
	return u
}
