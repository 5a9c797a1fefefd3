"""A miniature of SGLang's speculative decode path, written for the tracer tests.

Same shapes as SGLang's EAGLE v2 overlap path (scheduler, speculative worker, draft worker,
target worker, decode-result handler, the hook's ``record_decision``), none of its code: the
tracer is tested on real processes spawned and killed the way SGLang spawns and kills them.
"""
