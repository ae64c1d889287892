"""Node-suite cases known to fail, each with its cause (strict xfails: a case that starts passing must be
taken off this list). Empty: every one of the 1884 cases of onnx 1.23.2 passes."""

EXPECTED_FAILURES: dict[str, str] = {}

#: the ratchet: the number of node-suite cases that must pass (onnx 1.23.2 has 1884)
MIN_PASSING = 1884
