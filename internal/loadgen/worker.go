package loadgen

import (
	"errors"
	"math/rand/v2"
	"net"
	"strconv"
	"sync/atomic"
	"time"
)

// heldRing bounds how many of its grants a user remembers for repeats.
const heldRing = 256

// worker is one virtual user: a loop of grabs on one kept-alive connection.
// Each first grab is by a new user id; a repeat re-grabs, under the same id,
// an envelope this worker was granted a packet of.
type worker struct {
	d    *driver
	g    *grabber
	rng  *rand.Rand
	id   []byte // user id prefix, then the id being built
	pre  int    // length of the prefix in id
	seq  int64
	held []held
	ans  answer
	st   workerStats
	tl   workerTimeline
}

type held struct {
	env  int
	user string
}

// workerStats are one user's counts; merged after the run, so the hot path
// touches no shared map.
type workerStats struct {
	lat            []time.Duration
	status         map[int]int64
	codes          map[string]int64
	first, repeats int64
	granted        int64
	transport      int64
	timeouts       int64
	failed         int64 // transport errors, 5xx and answers that are not the API's JSON
	firstErr       string
}

func newWorkerStats(capacity int) workerStats {
	return workerStats{lat: make([]time.Duration, 0, capacity), status: map[int]int64{}, codes: map[string]int64{}}
}

func (s *workerStats) merge(o *workerStats) {
	s.lat = append(s.lat, o.lat...)
	for k, v := range o.status {
		s.status[k] += v
	}
	for k, v := range o.codes {
		s.codes[k] += v
	}
	s.first += o.first
	s.repeats += o.repeats
	s.granted += o.granted
	s.transport += o.transport
	s.timeouts += o.timeouts
	s.failed += o.failed
	if s.firstErr == "" {
		s.firstErr = o.firstErr
	}
}

func newWorker(d *driver, i int) *worker {
	prefix := "lg-" + d.runTag + "-" + strconv.Itoa(i) + "-"
	expect := int64(1 << 12)
	if d.cfg.Grabs > 0 {
		expect = min(d.cfg.Grabs/int64(d.cfg.Users)+1, 1<<16)
	}
	return &worker{
		d: d, g: newGrabber(d.cl),
		rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(i))),
		id:  append(make([]byte, 0, len(prefix)+20), prefix...), pre: len(prefix),
		st: newWorkerStats(int(expect)),
	}
}

func (w *worker) run() {
	d := w.d
	for !d.stopped.Load() {
		if d.cfg.Grabs > 0 && d.issued.Add(1) > d.cfg.Grabs {
			d.halt(stopGrabs)
			return
		}
		env, user, repeat := w.pick()
		if env < 0 {
			d.halt(stopSoldOut)
			return
		}
		start := time.Now()
		err := w.g.grab(d.envs[env].url, user, &w.ans)
		end := time.Now()
		w.record(env, user, repeat, err, end.Sub(start), end)
	}
}

// pick chooses the next grab: a repeat with probability -repeat (once the
// user holds something), else a first grab by a new user id.
func (w *worker) pick() (env int, user string, repeat bool) {
	if len(w.held) > 0 && w.d.cfg.Repeat > 0 && w.rng.Float64() < w.d.cfg.Repeat {
		h := w.held[w.rng.IntN(len(w.held))]
		return h.env, h.user, true
	}
	env = w.d.nextOpen()
	if env < 0 {
		return -1, "", false
	}
	w.seq++
	w.id = strconv.AppendInt(w.id[:w.pre], w.seq, 10)
	return env, string(w.id), false
}

func (w *worker) record(env int, user string, repeat bool, err error, lat time.Duration, at time.Time) {
	d, e := w.d, w.d.envs[env]
	d.done.Add(1)
	sec := w.tl.second(at.Sub(d.started), len(w.st.lat))
	failed, granted := w.st.failed, w.st.granted
	defer func() { w.tl.add(sec, w.st.failed-failed, w.st.granted-granted) }()
	if repeat {
		w.st.repeats++
	} else {
		w.st.first++
	}
	if err != nil {
		w.st.transport++
		w.st.failed++
		d.failed.Add(1)
		if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
			w.st.timeouts++
		}
		if w.st.firstErr == "" {
			w.st.firstErr = err.Error()
		}
		if d.check != nil {
			d.check.Refused(e.id, user, repeat, 0, "")
		}
		return
	}
	w.st.lat = append(w.st.lat, lat)
	w.st.status[w.ans.status]++
	if w.ans.status == 200 && w.ans.Error.Code == "" {
		w.granted(env, user, repeat, at)
		return
	}
	w.st.codes[w.ans.Error.Code]++
	if w.ans.status >= 500 || w.ans.Error.Code == codeUndecodable {
		w.st.failed++
		d.failed.Add(1)
	}
	if !repeat && w.ans.Error.Code == "sold_out" {
		e.soldOut.Store(true)
	}
	if d.check != nil {
		d.check.Refused(e.id, user, repeat, w.ans.status, w.ans.Error.Code)
	}
}

func (w *worker) granted(env int, user string, repeat bool, at time.Time) {
	d, e, a := w.d, w.d.envs[env], &w.ans
	g := Grant{PacketID: a.PacketID, AmountCents: a.AmountCents, OrderNo: a.OrderNo}
	isNew := !repeat // the no-op server's answers are taken as they come
	if d.check != nil {
		isNew = d.check.Granted(e.id, user, repeat, a.EnvelopeID, g, a.Repeat)
		if isNew && d.check.SoldOut(e.id) {
			e.soldOut.Store(true)
		}
	}
	if !isNew {
		return
	}
	w.st.granted++
	d.granted.Add(1)
	storeMax(&d.lastGrant, at.UnixNano())
	if len(w.held) < heldRing {
		w.held = append(w.held, held{env, user})
	} else {
		w.held[w.rng.IntN(heldRing)] = held{env, user}
	}
	if d.watch != nil {
		d.watch.add(e.id, user, g, at)
	}
}

// storeMax raises v to n if n is larger.
func storeMax(v *atomic.Int64, n int64) {
	for {
		old := v.Load()
		if n <= old || v.CompareAndSwap(old, n) {
			return
		}
	}
}
