//! The linux port's schedule harness, recording clients and planted faults (tests and fuzzing only).
