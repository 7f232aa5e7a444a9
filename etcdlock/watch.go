package etcdlock

import (
	"context"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/golocker/locker/internal/driverkit"
)

// A waiter watches the key before its own, and a hold its own key once it
// has lasted watchDelay, through one gRPC watch stream per Driver opened on
// the client's connection: a watch is a message to create it and one to
// cancel it, from the revision the watcher read, with no goroutine of its
// own and no wait for the server's confirmation (clientv3's Watch has
// both). A hold released within watchDelay costs the two transactions
// alone.

// watchDelay is how long a hold lasts before its key is watched.
const watchDelay = 100 * time.Millisecond

// keyWatch is the Driver's watches and the requests to send on its stream.
type keyWatch struct {
	mu    sync.Mutex
	next  int64
	subs  map[int64]*sub
	queue []*pb.WatchRequest
	kick  chan struct{} // capacity 1: the queue has requests
}

// sub is a watch of the deletion of key from revision from on. f runs on
// the stream's goroutine and must not block: with sure, when the key was
// deleted; without, when the server cannot tell (the revision was
// compacted).
type sub struct {
	key  string
	from int64
	f    func(sure bool)
}

func createReq(id int64, s *sub) *pb.WatchRequest {
	return &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{
		Key: []byte(s.key), StartRevision: s.from, WatchId: id, Filters: []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NOPUT},
	}}}
}

// push queues req for the stream. w.mu is held.
func (w *keyWatch) push(req *pb.WatchRequest) {
	w.queue = append(w.queue, req)
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// subscribe watches the deletion of key from revision from on, and returns
// the function that ends the watch.
func (d *Driver) subscribe(key string, from int64, f func(sure bool)) (cancel func()) {
	w := &d.keys
	s := &sub{key: key, from: from, f: f}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.next++
	id := w.next
	w.subs[id] = s
	w.push(createReq(id, s))
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.drop(id)
	}
}

// drop ends the watch id, if it is still on. w.mu is held.
func (w *keyWatch) drop(id int64) {
	if _, ok := w.subs[id]; ok {
		delete(w.subs, id)
		w.push(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{CancelRequest: &pb.WatchCancelRequest{WatchId: id}}})
	}
}

// dispatch runs the watch that resp is about when its key was deleted, or
// when the server canceled it.
func (w *keyWatch) dispatch(resp *pb.WatchResponse) {
	w.mu.Lock()
	s := w.subs[resp.WatchId]
	deleted := false
	for _, ev := range resp.Events {
		deleted = deleted || ev.Type == mvccpb.DELETE
	}
	if s == nil || !deleted && !resp.Canceled {
		w.mu.Unlock()
		return
	}
	w.drop(resp.WatchId)
	w.mu.Unlock()
	s.f(deleted)
}

// watch keeps the Driver's stream until Close: it opens it, creates every
// watch on it from its revision, sends the queued requests, and
// dispatches what comes back. A stream that breaks (no leader: the stream
// requires one; a lost connection) is opened again, and its watches
// created again from their revisions, so no deletion is missed.
func (d *Driver) watch() {
	w := &d.keys
	for wait := time.Duration(0); driverkit.Sleep(d.ctx, wait); wait = min(max(2*wait, 20*time.Millisecond), time.Second) {
		ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(d.ctx))
		stream, err := pb.NewWatchClient(d.cli.ActiveConnection()).Watch(ctx, grpc.WaitForReady(true))
		if err != nil {
			cancel()
			continue
		}
		w.mu.Lock()
		w.queue = w.queue[:0]
		for id, s := range w.subs {
			w.push(createReq(id, s))
		}
		w.mu.Unlock()
		var sender sync.WaitGroup
		sender.Add(1)
		go func() {
			defer sender.Done()
			defer cancel()
			d.send(ctx, stream)
		}()
		select {
		case <-d.watching:
		default:
			close(d.watching)
		}
		for {
			resp, err := stream.Recv()
			if err != nil {
				break
			}
			w.dispatch(resp)
			wait = 0
		}
		cancel()
		sender.Wait()
	}
}

// send sends the queued requests on stream until ctx ends or a send fails.
func (d *Driver) send(ctx context.Context, stream pb.Watch_WatchClient) {
	w := &d.keys
	for {
		select {
		case <-w.kick:
		case <-ctx.Done():
			return
		}
		w.mu.Lock()
		reqs := w.queue
		w.queue = nil
		w.mu.Unlock()
		for _, req := range reqs {
			if stream.Send(req) != nil {
				return
			}
		}
	}
}
