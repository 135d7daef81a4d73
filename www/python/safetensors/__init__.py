"""`safetensors` for the page's Python: `safetensors.torch.load_file`, the way an exported
model (`model.toPython`) loads its weights. The file is parsed by the package
(`loadSafetensors`)."""
