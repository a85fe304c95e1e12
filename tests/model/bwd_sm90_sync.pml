/* Synchronization of the Hopper backward kernel (src/cuda/sm90/bwd_kernel.cuh),
 * checked by exhaustive state-space search with Spin.
 *
 * One producer warp loads each step's Q and dO by TMA into a ring of ST stages and
 * stores the step's LSE and D into the same stage with ordinary stores; the two
 * consumer warpgroups each take 64 of the block's 128 keys. Per step a consumer
 * computes S^T and dP^T (reading the stage's Q, dO, LSE and D), writes its 64 rows
 * of dS^T into the step's panel (P panels, step i in panel i % P), issues dV and dK
 * (reading the stage's dO and Q again), and publishes its rows on the panel's
 * mbarrier; dQ = dS K over both consumers' rows reads the whole panel once the
 * mbarrier has both. With DQLATE (head dim 64) a step's dQ is issued at the next
 * step, behind that step's S^T and dP^T, and retired at that step's end, and the
 * stage is freed at the next step; otherwise (head dim 128) a step issues and
 * retires its own dQ and frees its stage at its end. A TMA engine lands loads in
 * any order. Checked:
 *  - no load or LSE/D store lands in a stage a consumer may still read;
 *  - each consumer reads the step that was loaded for it (tags);
 *  - no consumer rewrites a panel while a dQ product (either consumer's) reads it,
 *    and a dQ product reads a panel that holds both consumers' rows of its step;
 *  - every mbarrier wait names its phase (try_wait.parity: the waiter at the
 *    phase it waits for or one behind);
 *  - no deadlock (Spin's invalid end states).
 * (Per-warp and per-thread arrivals are modeled per consumer: the stage's mbarrier
 * takes 8 warp arrivals and the panel's 256 thread arrivals, each after that
 * warp's or thread's own reads or stores, so the last arrival is the consumer's.)
 *
 * Parameters (spin -D...): DQLATE (1: head dim 64's late dQ), ST stages, P panels,
 * N steps. BUG_* defines plant known mistakes; tests/model/check_model.sh requires
 * the checker to find each.
 */
#ifndef DQLATE
#define DQLATE 1
#endif
#ifndef ST
#define ST 3
#endif
#ifndef P
#define P 3
#endif
#ifndef N
#define N 7
#endif
#define NCONS 2

typedef Bar { short phase; byte cnt };
Bar qfull[ST], qempty[ST], panel_full[P];

inline arrive(b, expected) {
  b.cnt++;
  if
  :: b.cnt == expected -> b.cnt = 0; b.phase++
  :: else -> skip
  fi
}

/* try_wait.parity for logical phase k (k = -1: the phase before the first) */
inline mwait(b, k) {
  assert(b.phase >= k);
  atomic { b.phase > k -> assert(b.phase == k + 1) }
}

bool q_loading[ST];
short q_tag[ST], q_next_tag[ST], lse_tag[ST];
byte q_read[ST];         /* consumers that may still read the stage */
short panel_tag[P * NCONS];   /* step whose rows consumer c last wrote into panel t: [t * NCONS + c] */
byte dq_reading[P];      /* dQ products in flight over the panel */
byte done;

proctype Producer() {
  short i; byte s;
  for (i : 0 .. N - 1) {
    s = i % ST;
    mwait(qempty[s], i / ST - 1);
    atomic {
      assert(q_read[s] == 0 && !q_loading[s]);
      q_loading[s] = true; q_next_tag[s] = i;
      arrive(qfull[s], 3)            /* lane 0's arrive.expect_tx; the bytes land later */
    }
    atomic {
      assert(q_read[s] == 0);          /* the lanes' LSE and D stores */
      lse_tag[s] = i;
      arrive(qfull[s], 3)            /* the lanes' arrivals after their stores */
    }
  }
  done++
}

/* The TMA engine: lands any load in flight (stage x exists when x < ST). */
#define LAND(x) atomic { x < ST && q_loading[x] -> q_loading[x] = false; q_tag[x] = q_next_tag[x]; arrive(qfull[x], 3) }
active proctype Tma() {
end:
  do
  :: LAND(0)
  :: LAND(1)
  :: LAND(2)
  :: LAND(3)
  od
}

/* A dQ product over panel t for step j: both consumers' rows of step j are in. */
inline issue_dq(t, j) {
  atomic {
    assert(panel_tag[t * NCONS] == j && panel_tag[t * NCONS + 1] == j);
    dq_reading[t]++
  }
}

proctype Consumer(byte c) {
  short i, prev_step = -1; byte s, t, prev_s, prev_t;
  for (i : 0 .. N - 1) {
    s = i % ST;
    mwait(qfull[s], i / ST);
    atomic { assert(q_tag[s] == i && lse_tag[s] == i && !q_loading[s]); q_read[s]++ }  /* S^T, dP^T issued */
    if
    :: DQLATE && i > 0 ->
      /* the previous step's dQ, queued behind this step's S^T and dP^T */
#ifndef BUG_NO_PANEL_WAIT
      mwait(panel_full[prev_t], prev_step / P);
#endif
      issue_dq(prev_t, prev_step);
      /* wgmma_wait<1>: S^T, dP^T and the previous dV, dK done, the dQ in flight;
       * the previous step's stage is read */
      atomic { q_read[prev_s]--; arrive(qempty[prev_s], NCONS) }
    :: else ->                         /* wgmma_wait<0> */
#ifdef BUG_EARLY_Q_EMPTY
      atomic { q_read[s]--; arrive(qempty[s], NCONS) }  /* freed before dV and dK read it */
#endif
      skip
    fi;
    /* the elementwise work (LSE, D of stage s), then dS^T into the step's panel */
    t = i % P;
    atomic {
      assert(dq_reading[t] == 0);
      panel_tag[t * NCONS + c] = i
    }
    /* dV += P^T dO, dK += dS^T Q issued: they read the stage again */
    assert(q_tag[s] == i && !q_loading[s]);
    atomic { arrive(panel_full[t], NCONS) };  /* the rows published */
    if
    :: DQLATE ->
      if
      :: i > 0 -> atomic { dq_reading[prev_t]-- }  /* wgmma_wait<1>: the previous dQ done */
      :: else -> skip
      fi;
      prev_step = i; prev_s = s; prev_t = t
    :: else ->
      mwait(panel_full[t], i / P);
      issue_dq(t, i);
      atomic {                         /* wgmma_wait<0>: everything retired */
        dq_reading[t]--;
#ifndef BUG_EARLY_Q_EMPTY
        q_read[s]--; arrive(qempty[s], NCONS)
#endif
      }
    fi
  }
  if
  :: DQLATE ->                         /* the last step's dQ */
    mwait(panel_full[prev_t], prev_step / P);
    issue_dq(prev_t, prev_step);
    atomic { dq_reading[prev_t]-- }
  :: else -> skip
  fi;
  done++
}

init {
  byte t;
  for (t : 0 .. P * NCONS - 1) { panel_tag[t] = -1 }
  atomic {
    run Producer();
    run Consumer(0);
    run Consumer(1)
  }
  done == NCONS + 1;
  for (t : 0 .. P - 1) { assert(dq_reading[t] == 0) }
}
