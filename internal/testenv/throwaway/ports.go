package throwaway

import (
	"errors"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
)

// FreePorts picks n loopback ports that are free now, and whose cluster bus
// ports (port + 10000) are free too when bus is set. Ports come from
// 10000-21999 so that bus ports, 20000-31999, stay below Linux's ephemeral
// range and outgoing connections do not take them. A port may still be
// taken by someone else before a server binds it: each server checks that
// the one answering is its own and is started again on other ports if not.
func FreePorts(n int, bus bool) ([]int, error) {
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			return nil, errors.New("found no free loopback ports")
		}
		p := 10000 + rand.IntN(12000)
		if slices.Contains(ports, p) || !portFree(p) || (bus && !portFree(p+10000)) {
			continue
		}
		ports = append(ports, p)
	}
	return ports, nil
}

func portFree(p int) bool {
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		return false
	}
	_ = ln.Close()
	return true
}

func addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }
