package redisstore_test

import (
	"fmt"
	"sync/atomic"
)

var orderSeq atomic.Int64

// orderNo returns a fresh order number for a test grab.
func orderNo() string { return fmt.Sprintf("20300517%010d", orderSeq.Add(1)) }
