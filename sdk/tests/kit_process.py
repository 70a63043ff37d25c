"""What the kit's native tests share: the kit (sdk/python) on this process's path, and a Python
process of its own for a case that rewires the interpreter (`random`, `sys.modules`)."""
import pathlib
import subprocess
import sys
import textwrap

PYTHON_KIT = pathlib.Path(__file__).resolve().parent.parent / "python"
if str(PYTHON_KIT) not in sys.path:
    sys.path.insert(0, str(PYTHON_KIT))


def run_with_kit(body: str, *paths: pathlib.Path, timeout: float = 120) -> str:
    """Run `body` (dedented) in a new Python process with the kit and then `paths` first on its
    path; what it printed. It must exit 0 within `timeout` seconds."""
    first = [str(PYTHON_KIT), *map(str, paths)]
    code = f"import sys\nsys.path[:0] = {first!r}\n" + textwrap.dedent(body)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return done.stdout
