package mysqllock

// LocalWaiters returns how many acquisitions of name wait in d's local
// queue, the head included. For tests.
func LocalWaiters(d *Driver, name string) int {
	d.waiting.mu.Lock()
	defer d.waiting.mu.Unlock()
	if q := d.waiting.byName[name]; q != nil {
		return q.Len()
	}
	return 0
}
