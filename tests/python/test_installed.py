"""The package as `pip install` installs it (run with OCCL_INSTALLED_PYTHON, see CMakeLists.txt):
occl, its extensions and the liboccl they load all come from the environment's site-packages, not
from a build tree, and occl.torch was built for the torch that environment has."""

import os
import sysconfig
import unittest

import torch  # before occl.torch, as users import it

import occl
import occl.torch


def _loaded(name):
    """The paths of the shared objects this process has mapped whose file name starts with `name`."""
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if "/" in line}
    return sorted(p for p in paths if os.path.basename(p).startswith(name))


class Package(unittest.TestCase):
    def setUp(self):
        self.site = os.path.realpath(sysconfig.get_paths()["platlib"])
        self.package = os.path.realpath(os.path.dirname(occl.__file__))

    def test_the_package_is_the_installed_one(self):
        self.assertEqual(os.path.dirname(self.package), self.site)
        for module in (occl._occl, occl.torch._C):
            self.assertEqual(os.path.dirname(os.path.realpath(module.__file__)), self.package)

    def test_liboccl_is_the_one_inside_the_package(self):
        libs = _loaded("liboccl.so")
        self.assertEqual([os.path.dirname(os.path.realpath(p)) for p in libs], [self.package])

    def test_the_torch_backend_was_built_for_this_torch(self):
        major_minor = ".".join(torch.__version__.split("+")[0].split(".")[:2])
        self.assertEqual(occl.torch._C.TORCH_VERSION_BUILT, major_minor)
        self.assertIn("OCCL", torch.distributed.Backend._plugins)
        if int(torch.__version__.split(".")[0]) >= 2:
            self.assertEqual(torch.distributed.Backend.backend_capability["occl"], ["cpu"])

    def test_the_version_is_the_distribution_version(self):
        from importlib import metadata

        self.assertEqual(metadata.version("occl"), occl.__version__)


if __name__ == "__main__":
    unittest.main()
