/* Synchronization of the Hopper forward kernel (src/cuda/sm90/fwd_kernel.cuh),
 * checked by exhaustive state-space search with Spin.
 *
 * One producer thread issues TMA loads (Q per tile, K and V per key tile through
 * a ring of ST stages), NC consumer warpgroups take them, pass the right to issue
 * GEMMs around in turn (pingpong named barriers), and write O; a TMA engine
 * completes the loads and the reads of O stores in any order. Every wait on an
 * mbarrier is checked against the parity rule of try_wait.parity (the waiter
 * must be at most one phase behind or at the phase it waits for; otherwise the
 * parity names the wrong phase), and every buffer write against its readers:
 *  - no load lands in a Q, K or V buffer that a consumer may still read;
 *  - each consumer reads the tile that was loaded for it (tags);
 *  - a staged O is never overwritten before its store has read it, and O staged
 *    over the V stages never meets a V load or a PV product still reading V;
 *  - a pingpong barrier is never passed twice before it is taken, and the turns
 *    end balanced;
 *  - no deadlock (Spin's invalid end states).
 *
 * Parameters (spin -D...): NC consumers (2, 3), ST stages, QBUF Q buffers in use
 * (1, 2), OTMA (1: TMA-store epilogue), OWN (1: O in a buffer of its own,
 * 0: over the V stages), DYN (1: dynamic schedule, tile indices handed to the
 * consumers through a queue of R slots, then -1), EARLY (1: each consumer takes
 * the next tile's index while its last P V runs, before the epilogue, as the
 * plain two-consumer kernels up to d 96 do, kEarlyNext). The block takes T = 3 tiles of
 * NK0, NK1, NK2 key tiles (a single-key-tile tile in the middle; the third
 * reuses the first's Q buffer); a tile of 0 key tiles loads nothing (rows that
 * see no key: the consumers write zeros).
 *
 * BUG_* defines plant known mistakes; the checker must find each
 * (tests/model/check_model.sh runs them as the model's own test).
 */
#ifndef NC
#define NC 2
#endif
#ifndef ST
#define ST 2
#endif
#ifndef QBUF
#define QBUF 2
#endif
#ifndef OTMA
#define OTMA 1
#endif
#ifndef OWN
#define OWN 0
#endif
#ifndef DYN
#define DYN 0
#endif
#ifndef EARLY
#define EARLY 0
#endif
#define R 2  /* queue slots (4 in the kernel; 2 wrap around sooner) */
#define T 3
#ifndef NK0
#define NK0 2
#endif
#ifndef NK1
#define NK1 1
#endif
#ifndef NK2
#define NK2 3
#endif

byte NK[T];

/* mbarriers: completed-phase count and arrivals in the current phase */
typedef Bar { short phase; byte cnt };
Bar qfull[2], qempty[2], kfull[ST], kempty[ST], vfull[ST], vempty[ST], oempty;

/* arrive at a barrier that completes after `expected` arrivals */
inline arrive(b, expected) {
  b.cnt++;
  if
  :: b.cnt == expected -> b.cnt = 0; b.phase++
  :: else -> skip
  fi
}

/* try_wait.parity loop for logical phase k (k = -1: the phase before the first).
 * The parity names phase k only while the barrier is at phase k or k + 1: a
 * waiter that starts further ahead would pass at once, one that wakes further
 * behind would sleep through its phase. */
inline mwait(b, k) {
  assert(b.phase >= k);
  atomic { b.phase > k -> assert(b.phase == k + 1) }
}

/* loads in flight and what they carry; readers of each buffer */
bool q_loading[2], k_loading[ST], v_loading[ST];
short q_tag[2], k_tag[ST], v_tag[ST];
short q_next_tag[2], k_next_tag[ST], v_next_tag[ST];
byte q_read[2], k_read[ST], v_read[ST];

/* O staging: a store issued whose read of shared memory is pending */
bool o_pending[NC];   /* own buffer, per consumer slice */
bool o_in_v[NC];      /* staged over V, per consumer slice */

/* pingpong: a pass given to consumer c and not yet taken */
bool turn[NC];
/* all-consumer epilogue barrier (over V) */
byte epi_cnt; byte epi_gen;

byte done;

/* the dynamic schedule's queue of tile indices */
short slot[R];
Bar sfull[R], sempty[R];

/* the producer's n-th hand-over */
inline push(n, val) {
#ifndef BUG_QUEUE_NO_WAIT
  mwait(sempty[n % R], n / R - 1);
#endif
  atomic { slot[n % R] = val; arrive(sfull[n % R], 1) };
  n++
}
/* a consumer's n-th read, which must be `want` */
inline pop(n, want) {
  mwait(sfull[n % R], n / R);
  atomic { assert(slot[n % R] == want); arrive(sempty[n % R], NC) }
}
/* EARLY: tile i's consumer reads the next index (tile i + 1's, or -1 after the
 * last), through the caller's nx and nw (inline arguments are substituted as text) */
inline pop_next(i) {
  if
  :: DYN && EARLY ->
    nx = i + 1;
    nw = (nx < T -> nx : -1);
    pop(nx, nw)
  :: else -> skip
  fi
}

inline q_slot(i, idx, k) {
  if
#ifdef BUG_Q_PARITY
  :: QBUF == 2 -> idx = i % 2; k = i   /* parity of the tile count, not of the buffer's uses */
#else
  :: QBUF == 2 -> idx = i % 2; k = i / 2
#endif
  :: else -> idx = 0; k = i
  fi
}

proctype Producer() {
  byte i, n, idx, s, c; short k; short j = 0, qi = 0, pn = 0;
  for (i : 0 .. T - 1) {
    if
    :: DYN -> push(pn, i)
    :: else -> skip
    fi;
    if
    :: NK[i] == 0 -> skip
    :: else ->
    q_slot(qi, idx, k);
    mwait(qempty[idx], k - 1);
    atomic {
      assert(q_read[idx] == 0 && !q_loading[idx]);
      q_loading[idx] = true; q_next_tag[idx] = i;
      arrive(qfull[idx], 2)  /* arrive.expect_tx; the TMA engine completes the bytes */
    }
    for (n : 1 .. NK[i]) {
      s = j % ST;
      mwait(kempty[s], j / ST - 1);
      atomic {
        assert(k_read[s] == 0 && !k_loading[s]);
        k_loading[s] = true; k_next_tag[s] = j;
        arrive(kfull[s], 2)
      }
#ifndef BUG_NO_O_WAIT
      if
      :: OTMA && !OWN && qi > 0 && n == 1 -> mwait(oempty, qi - 1)
      :: else -> skip
      fi;
#endif
      mwait(vempty[s], j / ST - 1);
      atomic {
        assert(v_read[s] == 0 && !v_loading[s]);
        for (c : 0 .. NC - 1) { assert(!o_in_v[c]) }
        v_loading[s] = true; v_next_tag[s] = j;
        arrive(vfull[s], 2)
      }
      j++
    }
    qi++
    fi
  }
  if
  :: DYN -> push(pn, -1)
  :: else -> skip
  fi;
  done++
}

/* The TMA engine: lands any load in flight. (When a store of an O buffer of its
 * own finishes reading shared memory matters to no one but the consumer that
 * issued it, which waits for it: that read ends at the wait.) */
#define LAND(ok, ld, tg, nt, fb, x) atomic { (ok) && ld[x] -> ld[x] = false; tg[x] = nt[x]; arrive(fb[x], 2) }
active proctype Tma() {
end:
  do
  :: LAND(true, q_loading, q_tag, q_next_tag, qfull, 0)
  :: LAND(true, q_loading, q_tag, q_next_tag, qfull, 1)
  :: LAND(true, k_loading, k_tag, k_next_tag, kfull, 0)
  :: LAND(true, k_loading, k_tag, k_next_tag, kfull, 1)
  :: LAND(ST > 2, k_loading, k_tag, k_next_tag, kfull, ST - 1)
  :: LAND(true, v_loading, v_tag, v_next_tag, vfull, 0)
  :: LAND(true, v_loading, v_tag, v_next_tag, vfull, 1)
  :: LAND(ST > 2, v_loading, v_tag, v_next_tag, vfull, ST - 1)
  od
}

inline turn_sync(c) { atomic { turn[c] -> turn[c] = false } }
inline turn_pass(c) {
  atomic {
    assert(!turn[(c + 1) % NC]);  /* a second arrive before the sync would complete the barrier early */
    turn[(c + 1) % NC] = true
  }
}

/* S = Q K^T issued: it reads this tile's Q (no load may land there until the
 * tile's last S has completed) and K stage s until it completes */
inline issue_s(s) {
  atomic { assert(q_tag[idx] == i && !q_loading[idx]); k_read[s]++ }
}

proctype Consumer(byte c) {
  byte i, n, idx, s, sv, e; short k; short jc = 0, pv, qi = 0; short nx, nw;
  byte my_gen;
  for (i : 0 .. T - 1) {
    if
#ifdef BUG_EARLY_REPOP
    :: DYN -> pop(i, i)                /* reads tile i's index again after pop_next */
#else
    :: DYN && (!EARLY || i == 0) -> pop(i, i)
#endif
    :: else -> skip
    fi;
    if
    :: NK[i] == 0 -> pop_next(i)      /* no key visible: O = 0 written from registers */
    :: else ->
    q_slot(qi, idx, k);
    mwait(qfull[idx], k);
    atomic { assert(q_tag[idx] == i); q_read[idx]++ }
    /* first key tile: S only */
    s = jc % ST;
    mwait(kfull[s], jc / ST);
    atomic { assert(k_tag[s] == jc) };
    turn_sync(c);
    issue_s(s);                        /* S = Q K^T */
    turn_pass(c);
    atomic {                           /* wgmma_wait<0>: S landed */
      k_read[s]--; arrive(kempty[s], NC);
      if
#ifdef BUG_EARLY_Q_RELEASE
      :: true -> q_read[idx]--; arrive(qempty[idx], NC)  /* before the tile's last S */
#else
      :: NK[i] == 1 -> q_read[idx]--; arrive(qempty[idx], NC)
      :: else -> skip
#endif
      fi
    }
    pv = jc; jc++;
    for (n : 2 .. NK[i]) {
      s = jc % ST;
      mwait(kfull[s], jc / ST);
      atomic { assert(k_tag[s] == jc) };
      turn_sync(c);
      issue_s(s);
      sv = pv % ST;
      mwait(vfull[sv], pv / ST);
      atomic {
        assert(v_tag[sv] == pv);
        for (e : 0 .. NC - 1) { assert(!o_in_v[e]) }
        v_read[sv]++                   /* PV issued */
      }
      turn_pass(c);
      atomic {                         /* wgmma_wait<1>: S landed */
        k_read[s]--; arrive(kempty[s], NC);
        if
#ifndef BUG_EARLY_Q_RELEASE
        :: n == NK[i] -> q_read[idx]--; arrive(qempty[idx], NC)
#endif
        :: else -> skip
        fi
      }
      atomic { v_read[sv]--; arrive(vempty[sv], NC) }  /* wgmma_wait<0>: PV landed */
      pv = jc; jc++
    }
    /* last PV */
    sv = pv % ST;
    mwait(vfull[sv], pv / ST);
    atomic { assert(v_tag[sv] == pv) };
    turn_sync(c);
    atomic {
      for (e : 0 .. NC - 1) { assert(!o_in_v[e]) }
      v_read[sv]++
    }
    turn_pass(c);
    pop_next(i);                       /* EARLY: under the last PV */
    atomic { v_read[sv]--; arrive(vempty[sv], NC) };
    /* epilogue */
    if
    :: OTMA && OWN ->
#ifndef BUG_NO_STORE_WAIT
      o_pending[c] = false;            /* the issuer's wait_group.read, then the stage barrier */
#endif
      atomic { assert(!o_pending[c]); o_pending[c] = true }  /* staged, store issued */
    :: OTMA && !OWN ->
#ifndef BUG_NO_EPILOGUE_BARRIER
      atomic { my_gen = epi_gen; epi_cnt++; if :: epi_cnt == NC -> epi_cnt = 0; epi_gen++ :: else -> skip fi };
      epi_gen != my_gen;               /* every consumer is past its last PV */
#endif
      atomic {
        for (e : 0 .. ST - 1) { assert(v_read[e] == 0 && !v_loading[e]) }
        o_in_v[c] = true               /* staged over V, store issued */
      };
      o_in_v[c] = false;               /* wait_group.read: the store has read it */
      atomic { arrive(oempty, NC) }
    :: else -> skip
    fi;
    qi++
    fi
  }
  if
  :: DYN && !EARLY -> pop(T, -1)
  :: else -> skip
  fi;
#ifndef BUG_NO_LAST_TURN
  if
  :: c == 0 -> turn_sync(c)           /* the extra pass the last consumer gave */
  :: else -> skip
  fi;
#endif
  o_pending[c] = false;                /* wait_group.read: the last store has read shared memory */
  done++
}

init {
  byte c;
  NK[0] = NK0; NK[1] = NK1; NK[2] = NK2;
  turn[0] = true;  /* the last consumer lets consumer 0 go first */
  atomic {
    run Producer();
    for (c : 0 .. NC - 1) { run Consumer(c) }
  }
  done == NC + 1;
  for (c : 0 .. NC - 1) { assert(!turn[c]) }  /* turns balanced */
  assert(qfull[0].cnt == 0 && qempty[0].cnt == 0 && kempty[0].cnt == 0 && vempty[0].cnt == 0)
}
