"""python3 sandrun_main.py PROGRAM [ARGS...]: runs PROGRAM as python3 would (sandrun_loader)."""
import sandrun_loader

sandrun_loader.main()
