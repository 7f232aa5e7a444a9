// Package keyslot computes the Redis Cluster hash slot of a key, for
// redislock (which renews a batch's leases one slot at a time) and for the
// Redis test servers (which find the node that serves a key). It uses the
// standard library only.
package keyslot

import "strings"

// Slots is how many hash slots a Redis Cluster has.
const Slots = 16384

// Of returns the slot of key, as CLUSTER KEYSLOT computes it: CRC16 of its
// hash tag (the part between the first '{' and the next '}', when not
// empty), else of the whole key, modulo Slots.
func Of(key string) uint16 {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			key = key[s+1 : s+1+e]
		}
	}
	return crc16(key) % Slots
}

// crc16 is CRC-16/XMODEM, the checksum of Redis Cluster's key slots.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
