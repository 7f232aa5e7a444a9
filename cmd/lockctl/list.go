package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/golocker/locker"
)

// holdJSON is one hold in `list --json`.
type holdJSON struct {
	Name        string     `json:"name"`
	Owner       string     `json:"owner"`
	Token       uint64     `json:"token"`
	Expires     *time.Time `json:"expires,omitempty"`
	ExpiresInMS *int64     `json:"expires_in_ms,omitempty"`
}

func cmdList(ctx context.Context, g globals, args []string, e env) error {
	fs := newFlags("list", &g)
	prefix := fs.String("prefix", "", "only locks whose names start with this")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseNoArgs(fs, args, " (use --prefix)"); err != nil {
		return err
	}
	c, u, err := open(ctx, g, e)
	if err != nil {
		return err
	}
	defer c.Close()
	hs, err := c.Holds(ctx, *prefix)
	if errors.Is(err, locker.ErrNotSupported) {
		return fail(exitBackend, "the backend %s cannot list locks", u)
	}
	if err != nil {
		return fail(exitBackend, "%v", err)
	}
	if len(hs) == 0 && usesDefault(g, e) {
		fmt.Fprintf(e.stderr, "lockctl: no holds%s\n", defaultHint(g, e, u))
	}
	now := time.Now()
	if *asJSON {
		out := make([]holdJSON, 0, len(hs))
		for _, h := range hs {
			j := holdJSON{Name: h.Name, Owner: h.Owner, Token: h.Token}
			if !h.Expires.IsZero() {
				exp := h.Expires.UTC()
				ms := h.Expires.Sub(now).Milliseconds()
				j.Expires, j.ExpiresInMS = &exp, &ms
			}
			out = append(out, j)
		}
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tOWNER\tTOKEN\tEXPIRES IN")
	for _, h := range hs {
		exp := "session"
		if !h.Expires.IsZero() {
			exp = h.Expires.Sub(now).Round(time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", h.Name, h.Owner, h.Token, exp)
	}
	return tw.Flush()
}

func cmdRelease(ctx context.Context, g globals, args []string, e env) error {
	fs := newFlags("release", &g)
	force := fs.Bool("force", false, "free the lock whoever holds it")
	pos, _, dash, err := parseArgs(fs, args)
	switch {
	case err != nil:
		return err
	case len(pos) != 1 || dash:
		return usage("release takes one lock name: lockctl release --force NAME")
	case pos[0] == "":
		return usage("release: empty lock name")
	case !*force:
		return usage("release frees the lock whoever holds it; say so with --force")
	}
	c, u, err := open(ctx, g, e)
	if err != nil {
		return err
	}
	defer c.Close()
	switch err := c.ForceRelease(ctx, pos[0]); {
	case errors.Is(err, locker.ErrNotSupported):
		return fail(exitBackend, "the backend %s cannot release locks by force", u)
	case errors.Is(err, locker.ErrNotHeld):
		return fail(exitNotHeld, "%s is not held: nothing to release%s", quote(pos[0]), defaultHint(g, e, u))
	case errors.Is(err, locker.ErrInvalidName):
		return usage("%v", err)
	case err != nil:
		return fail(exitBackend, "%v", err)
	}
	if c.Capabilities().LostSignal {
		fmt.Fprintf(e.stdout, "released %s; the backend tells its holder at once\n", quote(pos[0]))
	} else {
		fmt.Fprintf(e.stdout, "released %s; its holder learns it at its next renewal, up to a third of its lease later (within a second under lockctl run), and may act as the holder until then\n", quote(pos[0]))
	}
	return nil
}
