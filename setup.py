"""Build hook for the one optional C extension, the record loop of the RecordBatch v2 reader
(`riverlog.common.records._speedups`, decision 0016). Everything else is in pyproject.toml.
`optional=True`: where no C compiler is found the install goes on without it, and the reader
runs its pure-Python loop."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "riverlog.common.records._speedups",
            ["src/riverlog/common/records/_speedups.c"],
            optional=True,
        )
    ]
)
