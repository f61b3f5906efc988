"""Cell execution: find a cell, set it up, run it, write and read its result, and fingerprint the code it depends on."""
