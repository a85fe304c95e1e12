"""The run's random seed: fresh each run, or FLASHPP_TEST_SEED to reproduce one."""

import os
import secrets
import zlib

_env = os.environ.get("FLASHPP_TEST_SEED")
RUN_SEED = int(_env, 0) if _env else secrets.randbits(63)


def seed_for(name: str) -> int:
    """A seed for one test, derived from the run seed and the test's id."""
    return (RUN_SEED ^ (zlib.crc32(name.encode()) * 0x9E3779B97F4A7C15)) & ((1 << 63) - 1)


def reproduce_hint() -> str:
    return f"reproduce with FLASHPP_TEST_SEED={RUN_SEED}"
