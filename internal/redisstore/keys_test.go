package redisstore_test

import (
	"fmt"
	"strings"
	"testing"

	"redpacket/internal/redisstore"
)

// crc16 is CRC-16/XMODEM, the checksum Redis Cluster takes of a key.
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

// keySlot is the Redis Cluster slot of key, honouring hash tags as the
// cluster specification defines them.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % 16384)
}

// hashTag is the part of key Redis Cluster hashes, or "" without a tag.
func hashTag(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return ""
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return ""
	}
	return key[i+1 : i+1+j]
}

func TestKeySlotReference(t *testing.T) {
	t.Parallel()
	// Values from the Redis Cluster specification and CLUSTER KEYSLOT.
	if got := crc16("123456789"); got != 0x31C3 {
		t.Fatalf("crc16(123456789) = %#x, want 0x31c3", got)
	}
	for key, want := range map[string]int{
		"foo": 12182, "bar": 5061, "{user1000}.following": 3443, "{user1000}.followers": 3443,
		"somekey": 11058, "{}x": 10595, "{rp:s3}:e:35:meta": 558,
	} {
		if got := keySlot(key); got != want {
			t.Errorf("keySlot(%q) = %d, want %d", key, got, want)
		}
	}
}

func TestKeysShareOneSlotPerEnvelope(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 4, 16, 1024} {
		k := redisstore.NewKeys("t:pfx", shards)
		if k.Shards() != shards {
			t.Fatalf("Shards() = %d, want %d", k.Shards(), shards)
		}
		for _, id := range []int64{0, 1, 2, 3, 15, 16, 17, 1001, 123456789, 1<<53 - 1} {
			shard := k.Shard(id)
			if want := int(id % int64(shards)); shard != want {
				t.Fatalf("shards=%d: Shard(%d) = %d, want %d", shards, id, shard, want)
			}
			keys := []string{k.Meta(id), k.Pool(id), k.Claims(id), k.ClaimsBucket(id, 3, 2), k.Consumed(shard), k.Inflight(shard), k.Rejected(shard),
				k.Orders(shard, "20300517")}
			wantTag := fmt.Sprintf("t:pfx:s%d", shard)
			for _, key := range keys {
				if tag := hashTag(key); tag != wantTag {
					t.Errorf("shards=%d id=%d: key %q has hash tag %q, want %q", shards, id, key, tag, wantTag)
				}
				if keySlot(key) != keySlot(keys[0]) {
					t.Errorf("shards=%d id=%d: key %q in slot %d, meta %q in slot %d",
						shards, id, key, keySlot(key), keys[0], keySlot(keys[0]))
				}
			}
		}
	}
}

func TestKeysDistinct(t *testing.T) {
	t.Parallel()
	const shards = 16
	k := redisstore.NewKeys("p", shards)
	tags := map[string]int{}
	for shard := range shards {
		tag := hashTag(k.Consumed(shard))
		if prev, dup := tags[tag]; dup {
			t.Errorf("shards %d and %d share hash tag %q", prev, shard, tag)
		}
		tags[tag] = shard
	}
	// Every key of the service is distinct across envelopes and roles.
	seen := map[string]string{}
	add := func(key, what string) {
		if prev, dup := seen[key]; dup {
			t.Errorf("key %q is both %s and %s", key, prev, what)
		}
		seen[key] = what
	}
	for id := int64(0); id < 40; id++ {
		add(k.Meta(id), fmt.Sprintf("meta %d", id))
		add(k.Pool(id), fmt.Sprintf("pool %d", id))
		add(k.Claims(id), fmt.Sprintf("claims %d", id))
		for b := range 3 {
			add(k.ClaimsBucket(id, 3, b), fmt.Sprintf("claims bucket %d of %d", b, id))
		}
	}
	for shard := range shards {
		add(k.Consumed(shard), fmt.Sprintf("consumed %d", shard))
		add(k.Inflight(shard), fmt.Sprintf("inflight %d", shard))
		add(k.Rejected(shard), fmt.Sprintf("rejected %d", shard))
		add(k.Orders(shard, "20300517"), fmt.Sprintf("orders %d of a day", shard))
		add(k.Orders(shard, "20300518"), fmt.Sprintf("orders %d of the next day", shard))
	}
	// Different prefixes never share a key.
	if a, b := redisstore.NewKeys("a", 4).Meta(1), redisstore.NewKeys("b", 4).Meta(1); a == b {
		t.Errorf("prefixes a and b both give %q", a)
	}
}

func TestKeyNamesFollowDesign(t *testing.T) {
	t.Parallel()
	k := redisstore.NewKeys("rp", 16)
	for got, want := range map[string]string{
		k.Meta(35):               "{rp:s3}:e:35:meta",
		k.Pool(35):               "{rp:s3}:e:35:pool",
		k.Claims(35):             "{rp:s3}:e:35:claims",
		k.ClaimsBucket(35, 0, 0): "{rp:s3}:e:35:claims",
		k.ClaimsBucket(35, 7, 6): "{rp:s3}:e:35:claims:6",
		k.Consumed(3):            "{rp:s3}:consumed",
		k.Inflight(3):            "{rp:s3}:inflight",
		k.Rejected(15):           "{rp:s15}:rejected",
		k.Orders(3, "20300517"):  "{rp:s3}:order:20300517",
	} {
		if got != want {
			t.Errorf("key %q, want %q", got, want)
		}
	}
	s := redisstore.New(nil, "rp", 16)
	if s.Keys() != k {
		t.Errorf("Store.Keys() = %+v, want %+v", s.Keys(), k)
	}
}

func TestIdentifierKeysShareOneTag(t *testing.T) {
	t.Parallel()
	const shards = 16
	k := redisstore.NewKeys("rp", shards)
	keys := []string{k.SharePool(), k.ShareDay("300517"), k.ShortIDs(), k.ShortIDsReady()}
	seen := map[string]bool{}
	for _, key := range keys {
		if tag := hashTag(key); tag != "rp:ids" {
			t.Errorf("key %q has hash tag %q, want rp:ids", key, tag)
		}
		if seen[key] {
			t.Errorf("key %q built twice", key)
		}
		seen[key] = true
	}
	for shard := range shards {
		if hashTag(k.Consumed(shard)) == "rp:ids" {
			t.Errorf("shard %d shares the identifiers' hash tag", shard)
		}
	}
	if k.ShareDay("300517") == k.ShareDay("300518") {
		t.Errorf("two days share a counter")
	}
}

// TestGrabKeysAreTheKeyNames: the grab's keys, built together, are the
// names each key's own builder gives.
func TestGrabKeysAreTheKeyNames(t *testing.T) {
	t.Parallel()
	k := redisstore.NewKeys("rp", 16)
	for _, id := range []int64{1, 35, 1<<53 - 1} {
		for _, buckets := range []int{0, 1, 7, 1563} {
			for _, user := range []string{"alice", "user-12345", "u:1"} {
				want := [4]string{k.Meta(id), k.Pool(id), k.UserClaims(id, buckets, user), k.Recipients(id)}
				if got := k.GrabKeys(id, buckets, user); got != want {
					t.Errorf("GrabKeys(%d, %d, %q) = %v, want %v", id, buckets, user, got, want)
				}
			}
		}
	}
}
