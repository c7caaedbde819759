"""What the heads do: attention dumps, the attention bias and gradient
sensitivity of Pande et al. (§3.1-3.2), and Hidden Token Attribution per head
with relative-position histograms (Pascual et al.).

* :mod:`.model`, :mod:`.dump`: a checkpoint ready for analysis; records.
* :mod:`.relations`: the local / syntactic / unrelated position sets.
* :mod:`.bias`, :mod:`.sensitivity`, :mod:`.positions`: the statistics.
* :mod:`.jacobian`, :mod:`.contribution`: attention-block Jacobian norms
  (closed form) and the input contribution (forward mode).
* :mod:`.figures`: the papers' figures.
"""
