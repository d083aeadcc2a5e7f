"""txnats' test suite.

Importing this package picks the Hypothesis settings profile (``ci`` when the ``CI``
environment variable is set, else ``dev``): see :mod:`tests._hypothesis_profiles`.
"""

from tests import _hypothesis_profiles

_hypothesis_profiles.load()
