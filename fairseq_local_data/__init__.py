"""The data tools of fairseq-local: plain Python, importable and runnable
without fairseq (and without the plugin package ``fairseq_local``).

Each tool runs as ``python -m fairseq_local_data.<tool> --help``:

* ``synthetic``: the seeded synthetic parallel corpus (its language is in
  :mod:`fairseq_local_data.language`) and its gold source trees;
* ``wmt``: WMT'14 archives, manifests, tokenisation, cleaning, SentencePiece,
  the summary (text steps in :mod:`fairseq_local_data.cleaning`), and the test
  sets and what scripts/evaluate-wmt14.sh needs to score them
  (:mod:`fairseq_local_data.testsets`);
* ``glue``, ``glue_fake``, ``glue_hard``: the GLUE layout, its preparation for
  fairseq (``glue binarize`` runs fairseq's own fairseq-preprocess as a child
  process), a stand-in, and (``--hard``) stand-in tasks whose labels need
  non-local information;
* ``bert_corpus``, ``standins``: the BERT pretraining corpus and its stand-ins;
* ``bpe``: GPT-2 byte-level BPE files and SentencePiece (the GPT-2 encoder,
  on Hugging Face's ``tokenizers``, is :mod:`fairseq_local_data.gpt2_bpe`).

:mod:`fairseq_local_data.syntax` reads and writes CoNLL-U sentences.  Bad
input raises a subclass of :class:`fairseq_local_data.errors.OneLineError`.
"""
