# CPU that 4 idle thread-ranks use in 5 s (occl.Comm.all(4), right after creation, getrusage of the
# process). Usage: /usr/bin/python3 idle_cpu.py BUILD_DIR/python
import resource, time, sys
sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else 'build-cpu/python')
import occl
comms = occl.Comm.all(4)
before = resource.getrusage(resource.RUSAGE_SELF)
t0 = time.monotonic()
time.sleep(5)
after = resource.getrusage(resource.RUSAGE_SELF)
cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
print(f"4 idle thread-ranks: {cpu*1000:.1f} ms of CPU in {time.monotonic()-t0:.2f} s, {100*cpu/5:.2f}% of one core")
for c in comms: c.close()
