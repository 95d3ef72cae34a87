"""What pyproject.toml cannot say: the page's files stay in the top-level ``static/`` and ``templates/`` of the
source tree, and the wheel carries them inside ``webapp/``, where an installed specchat looks first
(``webapp.page_folder``)."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

PAGE_FOLDERS = ("static", "templates")


class BuildWithPage(build_py):
    def run(self):
        # build_py only adds to its folder: one left by an older layout would carry modules that moved out since
        # (a wheel built in a working tree once carried the training lab that way).
        shutil.rmtree(self.build_lib, ignore_errors=True)
        super().run()
        for folder in PAGE_FOLDERS:
            target = Path(self.build_lib) / "webapp" / folder
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(folder, target)


setup(cmdclass={"build_py": BuildWithPage})
