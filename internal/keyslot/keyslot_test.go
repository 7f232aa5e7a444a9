package keyslot

import "testing"

func TestOf(t *testing.T) {
	// Slots Redis Cluster gives (CLUSTER KEYSLOT) for these keys.
	for key, want := range map[string]uint16{
		"foo":                  12182,
		"{user1000}.following": 3443,
		"{user1000}.followers": 3443,
		"golocker:{orders/42}": Of("orders/42"),
		"{}x":                  Of("{}x"),
	} {
		if got := Of(key); got != want {
			t.Errorf("Of(%q) = %d, want %d", key, got, want)
		}
	}
}
