#!/usr/bin/python3
"""Tests of tools/setup.sh against stand-ins for cmake and dpkg-query: which arguments reach CMake's configure and
build steps (README command 1 builds only lcsim, command 2 everything), and that nothing is installed when every
package is there."""
import json
import os
import stat
import subprocess
import tempfile
import unittest

SETUP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "setup.sh")

# Records each call's arguments, one JSON list a line.
FAKE_CMAKE = r"""#!/usr/bin/python3
import json, os, sys
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\n")
"""
# Every package is installed; the packages asked about are recorded.
FAKE_DPKG_QUERY = r"""#!/usr/bin/python3
import os, sys
with open(os.environ["FAKE_LOG"] + ".dpkg", "a") as log:
    log.write(sys.argv[-1] + "\n")
print("install ok installed", end="")
"""
FAKE_APT_GET = """#!/bin/sh
echo "apt-get must not run" >&2
exit 99
"""


class SetupTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        for name, text in (("cmake", FAKE_CMAKE), ("dpkg-query", FAKE_DPKG_QUERY), ("apt-get", FAKE_APT_GET)):
            path = os.path.join(self.dir.name, name)
            with open(path, "w") as f:
                f.write(text)
            os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
        self.log = os.path.join(self.dir.name, "calls")

    def tearDown(self):
        self.dir.cleanup()

    def run_setup(self, *args):
        env = dict(os.environ, PATH=self.dir.name + os.pathsep + os.environ["PATH"], FAKE_LOG=self.log)
        done = subprocess.run(["bash", SETUP, *args], env=env, capture_output=True, text=True)
        calls = []
        if os.path.exists(self.log):
            with open(self.log) as f:
                calls = [json.loads(line) for line in f]
        return done, calls

    def test_plain_run_configures_and_builds_every_target(self):
        done, calls = self.run_setup()
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(calls[0], ["-S", ".", "-B", "build"])
        self.assertEqual(calls[1][:2], ["--build", "build"])
        self.assertNotIn("--target", calls[1])
        self.assertEqual(len(calls), 2)

    def test_target_goes_to_the_build_step_and_configure_arguments_to_configure(self):
        done, calls = self.run_setup("--target", "lcsim", "-DLCSIM_WITH_CUDA=OFF")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(calls[0], ["-S", ".", "-B", "build", "-DLCSIM_WITH_CUDA=OFF"])
        self.assertEqual(calls[1][:2], ["--build", "build"])
        self.assertEqual(calls[1][-2:], ["--target", "lcsim"])

    def test_targets_repeat_in_both_spellings_beside_slurm(self):
        done, calls = self.run_setup("--target=lcsim", "--with-slurm", "--target", "lcsim_tests")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(calls[0], ["-S", ".", "-B", "build"])
        self.assertEqual(calls[1][-4:], ["--target", "lcsim", "--target", "lcsim_tests"])
        with open(self.log + ".dpkg") as f:
            self.assertIn("slurm-wlm", f.read().split())

    def test_only_the_full_set_up_installs_the_test_tools(self):
        done, _ = self.run_setup()
        self.assertEqual(done.returncode, 0, done.stderr)
        with open(self.log + ".dpkg") as f:
            asked = f.read().split()
        self.assertIn("chromium", asked)
        self.assertIn("python3-venv", asked)
        os.remove(self.log + ".dpkg")
        done, _ = self.run_setup("--target", "lcsim")
        self.assertEqual(done.returncode, 0, done.stderr)
        with open(self.log + ".dpkg") as f:
            asked = f.read().split()
        self.assertNotIn("chromium", asked)
        self.assertNotIn("python3-venv", asked)

    def test_target_without_a_name_is_refused_before_anything_runs(self):
        done, calls = self.run_setup("--target")
        self.assertEqual(done.returncode, 2)
        self.assertIn("--target needs a target name", done.stderr)
        self.assertEqual(calls, [])


if __name__ == "__main__":
    unittest.main()
