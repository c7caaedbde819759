"""What the heads do: attention dumps, the attention bias and gradient
sensitivity of Pande et al. (§3.1-3.2), Hidden Token Attribution per head
with relative-position histograms (Pascual et al.), and the head roles, head
importance and pruning curve of Voita et al. 2019.

* :mod:`.model`, :mod:`.dump`: a checkpoint ready for analysis; records.
* :mod:`.relations`: the local / syntactic / unrelated position sets.
* :mod:`.bias`, :mod:`.sensitivity`, :mod:`.positions`: the statistics.
* :mod:`.jacobian`, :mod:`.contribution`: attention-block Jacobian norms
  (closed form) and the input contribution (forward mode).
* :mod:`.figures`: the papers' figures.
* :mod:`.roles`, :mod:`.roles_figures`: head roles (Voita et al. §4-5).
* :mod:`.importance`, :mod:`.lrp`: head importance (LRP; Michel et al.'s
  gradient x gate).
* :mod:`.pruning`: the pruning curve's table and figures (Voita et al. §6).
"""
