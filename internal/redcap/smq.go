package redcap

import "github.com/shadowtune/shadowtune/internal/trace"

// smq stands for the choices of dm-cache's smq policy
// (drivers/md/dm-cache-policy-smq.c) in a Cache under Config.SMQ: which
// missed block it copies in and which cached block it gives up for it.
//
// Its hotspot queue ranks hotspot blocks (Config.HotspotSegments cache
// blocks each) in 64 levels. A miss raises its hotspot by the level jump
// when the hotspot was not raised since the last tick (update_hotspot_queue);
// a miss whose hotspot stands at the promote level or above copies its
// block in. The policy ticks when the bio picked after the previous tick
// completes (cache_end_io in dm-cache-target.c: need_tick_bio) and once a
// second (do_waker); a tick clears the raised marks and sets the promote
// level from how many of the misses since the last period found their
// hotspot in the top quarter (update_promote_levels, stats_assess): 48
// when under 1/16 did, 32 under 1/8, else 0. Once a second
// (HOTSPOT_UPDATE_PERIOD) the level jump is set the same way (4, 2, 1)
// and the queue's entries are spread over the levels again
// (q_redistribute), the top eight levels holding min(entries/64, cache
// blocks/hotspot size) of them. Cached blocks stand in a second queue
// (the clean queue): copied in at the top level, raised one level at
// their first hit in a cache period, spread over all levels once a
// minute (CACHE_UPDATE_PERIOD). With no free block a miss that would
// copy in frees instead the oldest block of the lowest level below 32,
// if any (queue_demotion), while fewer than a quarter of the blocks are
// free (FREE_TARGET).
//
// Left out: writes copy nothing in (their misses still raise their
// hotspots); the copies in flight are not bounded (migration_threshold);
// a demotion frees its block at once, where the kernel queues it as
// background work and may queue up to a quarter of the cache before the
// first completes.
type smq struct {
	perHot uint64 // cache blocks (segments) per hotspot block

	hot      *mlq
	hotBlock []uint64         // entry → hotspot block
	hotIndex map[uint64]int32 // hotspot block → entry
	hotUsed  int32            // entries handed out so far
	hotMark  []uint32         // entry → tick+1 of its last raise
	tick     uint32
	hits     uint32 // misses whose hotspot stood at level 48 or above, since the period began
	misses   uint32 // the other misses, and new hotspots
	jump     uint8
	promote  int // the promote level; smqLevels: none

	clean     *mlq     // cache slots holding a block
	cleanMark []uint32 // slot → period+1 of its last raise
	period    uint32   // cache periods so far

	started                        bool
	nextHotPeriod, nextCachePeriod int64 // ns
	nextWake                       int64 // ns
	needTick                       bool
	tickAt                         int64 // ns: the tick bio's completion; -1: none picked
}

const (
	smqHotPeriodNs   = 1_000_000_000  // HOTSPOT_UPDATE_PERIOD
	smqCachePeriodNs = 60_000_000_000 // CACHE_UPDATE_PERIOD
	smqWakeNs        = 1_000_000_000  // do_waker's COMMIT_PERIOD
	smqHitLevel      = smqLevels * 3 / 4
)

// newSMQ returns the policy of a cache of blocks blocks, hotspot blocks
// of perHot of them (calc_hotspot_params).
func newSMQ(blocks int, perHot int) *smq {
	perHot = max(perHot, 1)
	nHot := max(blocks/4, 1024)
	s := &smq{
		perHot:    uint64(perHot),
		hot:       newMLQ(nHot, 8, min(nHot/smqLevels, blocks/perHot)),
		hotBlock:  make([]uint64, nHot),
		hotIndex:  make(map[uint64]int32),
		hotMark:   make([]uint32, nHot),
		clean:     newMLQ(blocks, 0, 0),
		cleanMark: make([]uint32, blocks),
	}
	s.reset()
	return s
}

// reset forgets everything, as a new table does (smq_create).
func (s *smq) reset() {
	s.hot.reset()
	s.clean.reset()
	clear(s.hotIndex)
	clear(s.hotMark)
	clear(s.cleanMark)
	s.hotUsed, s.tick, s.hits, s.misses, s.period = 0, 0, 0, 0, 0
	s.jump, s.promote = 1, smqLevels
	s.started, s.needTick, s.tickAt = false, true, -1
}

// advance runs the ticks due by now, the arrival of a request (ns), and
// picks it as the tick bio if none is in flight: its tick comes at
// complete, its recorded completion, or at the next request when that
// is unknown.
func (s *smq) advance(now, complete int64) {
	if !s.started {
		s.started = true
		s.nextHotPeriod, s.nextCachePeriod, s.nextWake = now, now, now+smqWakeNs
	}
	for {
		bio := s.tickAt >= 0 && s.tickAt <= now
		wake := s.nextWake <= now
		switch {
		case bio && (!wake || s.tickAt <= s.nextWake):
			s.onTick(s.tickAt)
			s.tickAt, s.needTick = -1, true
			continue
		case wake:
			s.onTick(s.nextWake)
			// A quiet stretch ticks alike every second: two ticks stand
			// for all of them (the second sees the period's reset).
			s.nextWake += smqWakeNs
			if s.nextWake+smqWakeNs <= now {
				s.nextWake = now - (now-s.nextWake)%smqWakeNs
			}
			continue
		}
		break
	}
	if s.needTick {
		s.needTick = false
		s.tickAt = now
		if complete != trace.Unknown && complete > now {
			s.tickAt = complete
		}
	}
}

// onTick is smq_tick at time t: end_hotspot_period and end_cache_period.
func (s *smq) onTick(t int64) {
	s.tick++
	conf := s.assess()
	s.promote = smqLevels - smqLevels>>(2-conf)
	if t > s.nextHotPeriod {
		s.jump = 4 >> conf
		s.hot.redistribute()
		s.hits, s.misses = 0, 0
		s.nextHotPeriod = t + smqHotPeriodNs
	}
	if t > s.nextCachePeriod {
		s.period++
		s.clean.redistribute()
		s.nextCachePeriod = t + smqCachePeriodNs
	}
}

// assess is stats_assess: 0 poor (under 1/16 of the misses found their
// hotspot at level 48 or above), 1 fair (under 1/8), 2 well.
func (s *smq) assess() uint {
	n := s.hits + s.misses
	if n == 0 {
		return 0
	}
	switch c := (s.hits << 8) / n; {
	case c < 16:
		return 0
	case c < 32:
		return 1
	}
	return 2
}

// missed records a miss of cache block k in its hotspot and reports
// whether smq would copy k in (should_promote).
func (s *smq) missed(k uint64) bool {
	hb := k / s.perHot
	e, ok := s.hotIndex[hb]
	if ok {
		if int(s.hot.level[e]) >= smqHitLevel {
			s.hits++
		} else {
			s.misses++
		}
		var extra uint8
		if s.hotMark[e] != s.tick+1 {
			s.hotMark[e], extra = s.tick+1, s.jump
		}
		s.hot.requeue(e, extra)
		return int(s.hot.level[e]) >= s.promote
	}
	s.misses++
	if e = s.add(hb, 0); e == none {
		// All entries in use: the lowest level's oldest is reused and
		// keeps its level.
		if e = s.hot.peek(smqLevels); e == none {
			return false
		}
		s.hot.del(e)
		delete(s.hotIndex, s.hotBlock[e])
		s.hotMark[e] = 0
		s.place(e, hb)
	}
	return int(s.hot.level[e]) >= s.promote
}

// add queues hotspot block hb at level in an entry never used before,
// and returns it; none when every entry has been handed out.
func (s *smq) add(hb uint64, level uint8) int32 {
	if s.hotUsed >= int32(len(s.hotBlock)) {
		return none
	}
	e := s.hotUsed
	s.hotUsed++
	s.hot.level[e] = min(level, smqLevels-1)
	s.place(e, hb)
	return e
}

// place queues hotspot block hb in entry e, at e's level.
func (s *smq) place(e int32, hb uint64) {
	s.hotBlock[e], s.hotIndex[hb] = hb, e
	s.hot.push(e)
}

// hit records a hit of the block in slot (requeue).
func (s *smq) hit(slot int32) {
	if !s.clean.queued[slot] || s.cleanMark[slot] == s.period+1 {
		return
	}
	s.cleanMark[slot] = s.period + 1
	s.clean.requeue(slot, 1)
}

// cached queues the block in slot at level: the top level for a block
// just copied in (__complete_background_work), its kept level for one
// loaded (smq_load_mapping's hint).
func (s *smq) cached(slot int32, level uint8) {
	if s.clean.queued[slot] {
		s.clean.del(slot)
	}
	s.clean.level[slot] = min(level, smqLevels-1)
	s.cleanMark[slot] = 0
	s.clean.push(slot)
}

// dropped takes slot out of the clean queue (its block invalidated or
// demoted).
func (s *smq) dropped(slot int32) {
	if s.clean.queued[slot] {
		s.clean.del(slot)
	}
}

// victim returns the slot smq demotes to make room in a full cache, or
// none: the oldest of the lowest level below the middle
// (queue_demotion). The kernel demotes only while fewer than a quarter of
// the blocks are free or queued for demotion (free_target_met); with
// none free and demotions done at once, that always holds.
func (s *smq) victim() int32 {
	return s.clean.peek(smqLevels / 2)
}

// hotLevels returns the queued hotspot blocks and their levels, lowest
// level first, at most limit of them (the highest).
func (s *smq) hotLevels(limit int) (blocks []uint64, levels []uint8) {
	for l := range smqLevels {
		for e := s.hot.head[l]; e != none; e = s.hot.next[e] {
			blocks = append(blocks, s.hotBlock[e])
			levels = append(levels, uint8(l))
		}
	}
	if cut := len(blocks) - max(limit, 0); cut > 0 {
		blocks, levels = blocks[cut:], levels[cut:]
	}
	return blocks, levels
}

// loadHot queues hotspot blocks at their levels, as hotLevels gave them.
func (s *smq) loadHot(blocks []uint64, levels []uint8) {
	for i, hb := range blocks {
		if _, ok := s.hotIndex[hb]; ok {
			continue
		}
		var level uint8
		if i < len(levels) {
			level = levels[i]
		}
		s.add(hb, level)
	}
}
