"""PPO with a critic (``--algo ppo``) and Text2Grad (``--algo text2grad``): math in core.py, the algorithms in
algo.py and text2grad.py."""
