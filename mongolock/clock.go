package mongolock

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// clockRefresh is how often the Driver measures again the offset between
// the server's clock and its own.
const clockRefresh = 10 * time.Second

// serverInfo is what the driver needs from hello.
type serverInfo struct {
	LocalTime time.Time `bson:"localTime"`
	SetName   string    `bson:"setName"`
	Msg       string    `bson:"msg"`
}

// measureClock asks the server for its time (hello's localTime, in
// milliseconds) and records its offset from the local wall clock, taking
// the request's midpoint as the moment the server read its clock: the
// estimate is off by at most half the round trip plus a millisecond.
func (d *Driver) measureClock(ctx context.Context) (serverInfo, error) {
	var info serverInfo
	admin := d.client.Database("admin")
	sent := d.wallNow()
	err := admin.RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&info)
	var ce mongo.CommandError
	if errors.As(err, &ce) && ce.Code == 59 { // CommandNotFound: a server older than 4.4.2
		sent = d.wallNow()
		err = admin.RunCommand(ctx, bson.D{{Key: "isMaster", Value: 1}}).Decode(&info)
	}
	if err != nil {
		return info, err
	}
	recv := d.wallNow()
	if !info.LocalTime.IsZero() {
		mid := sent.Add(recv.Sub(sent) / 2)
		d.offset.Store(int64(info.LocalTime.Sub(mid)))
	}
	d.measured.Store(time.Now().UnixNano())
	return info, nil
}

// serverNow estimates the server's clock: the local wall clock plus the
// measured offset, measured again when it is older than clockRefresh.
func (d *Driver) serverNow(ctx context.Context) time.Time {
	if time.Since(time.Unix(0, d.measured.Load())) > clockRefresh {
		// A failure keeps the previous offset; the statement that follows
		// will meet the same server trouble and report it.
		_, _ = d.measureClock(ctx)
	}
	return d.wallNow().Add(time.Duration(d.offset.Load()))
}

// localTime converts a time of the server's clock to the local wall clock.
func (d *Driver) localTime(server time.Time) time.Time {
	return server.Add(-time.Duration(d.offset.Load()))
}
