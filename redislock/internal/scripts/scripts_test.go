package scripts

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/golocker/locker/backend"
	"github.com/golocker/locker/internal/drivertest"
	"github.com/golocker/locker/internal/testserver"
	"github.com/golocker/locker/internal/testserver/redisserver"
)

var (
	servers    testserver.Shared
	standalone = testserver.NewLazy(&servers, redisserver.Redis)
)

func TestMain(m *testing.M) { os.Exit(drivertest.Main(m, &servers)) }

// TestScriptsLoad: every script compiles on a real server (SCRIPT LOAD),
// and the queue's functions are in those that keep a queue, at their
// mark.
func TestScriptsLoad(t *testing.T) {
	ctx := drivertest.Context(t, time.Minute)
	c := redis.NewClient(&redis.Options{Addr: standalone.Get(t).Addr})
	defer c.Close()
	for name, s := range map[string]*redis.Script{
		"QueueAcquire": QueueAcquire, "QueueRelease": QueueRelease, "ForceRelease": ForceRelease,
		"Reserve": Reserve, "Waiters": Waiters, "Acquire": Acquire, "Release": Release,
		"Renew": Renew, "RenewMany": RenewMany,
	} {
		if err := s.Load(ctx, c).Err(); err != nil {
			t.Errorf("%s: SCRIPT LOAD: %v", name, err)
		}
	}
	for _, src := range []string{queueAcquireLua, queueReleaseLua} {
		before, _, ok := strings.Cut(src, queueMark)
		if !ok {
			t.Fatalf("a script without its mark: %.40q", src)
		}
		if got := withQueue(src); !strings.HasPrefix(got, before+queueLua) {
			t.Errorf("queue.lua is not at the mark of %.40q", src)
		}
	}
	if got := withQueue(reserveLua); !strings.HasPrefix(got, queueLua) {
		t.Error("queue.lua is not in front of a script without a mark")
	}
}

func TestParseAcquire(t *testing.T) {
	for _, tc := range []struct {
		res  any
		want Acquired
	}{
		{[]any{int64(1), int64(7), int64(70)}, Acquired{Status: 1, Token: 7, Last: 70}},
		{[]any{int64(1), int64(0)}, Acquired{Status: 1}}, // RedLock
		{[]any{int64(2), int64(7), int64(70), int64(900)}, Acquired{Status: 2, Token: 7, Last: 70, PTTL: 900}},
		{[]any{int64(0), int64(500), int64(9), "them", int64(8)}, Acquired{PTTL: 500, Fence: 9, Owner: "them", HolderToken: 8}},
		{[]any{int64(0), int64(-1)}, Acquired{PTTL: -1}}, // RedLock
	} {
		got, err := ParseAcquire(tc.res)
		if err != nil || got != tc.want {
			t.Errorf("ParseAcquire(%v) = %+v, %v; want %+v", tc.res, got, err, tc.want)
		}
	}
	for _, res := range []any{
		nil, "OK", []any{}, []any{int64(1)}, []any{"1", int64(7)}, []any{int64(1), "7"},
		[]any{int64(0), int64(500), int64(9), int64(3), int64(8)}, []any{int64(2), int64(7)},
		[]any{int64(3), int64(7)}, []any{int64(1), int64(7), int64(70), int64(1)},
	} {
		if _, err := ParseAcquire(res); !errors.Is(err, ErrReply) {
			t.Errorf("ParseAcquire(%v) = %v, want ErrReply", res, err)
		}
	}
}

func TestReplies(t *testing.T) {
	if OwnerReply(1) != nil || !errors.Is(OwnerReply(0), backend.ErrLost) || !errors.Is(OwnerReply(2), ErrReply) {
		t.Error("OwnerReply does not map 1, 0 and others to nil, ErrLost and ErrReply")
	}
	if MS(time.Millisecond+1) != 2 || MS(time.Second) != 1000 || MS(0) != 0 {
		t.Error("MS does not round up to whole milliseconds")
	}
	if Left(-1, time.Second) != time.Second || Left(-2, time.Second) != time.Second || Left(5, time.Second) != 5*time.Millisecond {
		t.Error("Left does not turn an unknown PTTL into the bound")
	}
	if MayHaveRun(redis.ErrClosed) || MayHaveRun(redis.Nil) || !MayHaveRun(errors.New("i/o timeout")) {
		t.Error("MayHaveRun: an error reply or a closed client cannot have run; a timeout may")
	}
}
