"""The Atari 2600 games of ale-py's ROM set, as shoal names them.

One row per game: (name, ROM id, minimal action count). The name is the one
gymnasium registers ("ALE/<name>-v5", ale_py.registration.rom_id_to_name);
the ROM id is ale-py's (ale_py.roms). The table is static so that the specs
(and their action spaces) exist without ale-py installed; it was generated
once from ale-py 0.12.1 by `generate_rows()`. tests/test_atari.py checks the
names against ale-py's ROM set, and loading a game's binding checks its
action count against the emulator (SpecMismatchError on a mismatch).

ale-py's ROM set also holds combat, joust, maze_craze and warlords, which
have no single-player mode; gymnasium registers no v5 env for them, and
neither does shoal.
"""
from __future__ import annotations

# ROMs without a single-player mode (skipped by gymnasium's v5 registration too).
MULTIPLAYER_ONLY = frozenset({"combat", "joust", "maze_craze", "warlords"})

# Every game with a full action set uses all 18 joystick actions.
FULL_ACTION_COUNT = 18

GAMES = (
    ("Adventure", "adventure", 18),
    ("AirRaid", "air_raid", 6),
    ("Alien", "alien", 18),
    ("Amidar", "amidar", 10),
    ("Assault", "assault", 7),
    ("Asterix", "asterix", 9),
    ("Asteroids", "asteroids", 14),
    ("Atlantis2", "atlantis2", 4),
    ("Atlantis", "atlantis", 4),
    ("Backgammon", "backgammon", 3),
    ("BankHeist", "bank_heist", 18),
    ("BasicMath", "basic_math", 6),
    ("BattleZone", "battle_zone", 18),
    ("BeamRider", "beam_rider", 9),
    ("Berzerk", "berzerk", 18),
    ("Blackjack", "blackjack", 4),
    ("Bowling", "bowling", 6),
    ("Boxing", "boxing", 18),
    ("Breakout", "breakout", 4),
    ("Carnival", "carnival", 6),
    ("Casino", "casino", 4),
    ("Centipede", "centipede", 18),
    ("ChopperCommand", "chopper_command", 18),
    ("CrazyClimber", "crazy_climber", 9),
    ("Crossbow", "crossbow", 18),
    ("Darkchambers", "darkchambers", 18),
    ("Defender", "defender", 18),
    ("DemonAttack", "demon_attack", 6),
    ("DonkeyKong", "donkey_kong", 18),
    ("DoubleDunk", "double_dunk", 18),
    ("Earthworld", "earthworld", 18),
    ("ElevatorAction", "elevator_action", 18),
    ("Enduro", "enduro", 9),
    ("Entombed", "entombed", 18),
    ("Et", "et", 18),
    ("FishingDerby", "fishing_derby", 18),
    ("FlagCapture", "flag_capture", 18),
    ("Freeway", "freeway", 3),
    ("Frogger", "frogger", 5),
    ("Frostbite", "frostbite", 18),
    ("Galaxian", "galaxian", 6),
    ("Gopher", "gopher", 8),
    ("Gravitar", "gravitar", 18),
    ("Hangman", "hangman", 18),
    ("HauntedHouse", "haunted_house", 18),
    ("Hero", "hero", 18),
    ("HumanCannonball", "human_cannonball", 18),
    ("IceHockey", "ice_hockey", 18),
    ("Jamesbond", "jamesbond", 18),
    ("JourneyEscape", "journey_escape", 16),
    ("Kaboom", "kaboom", 4),
    ("Kangaroo", "kangaroo", 18),
    ("KeystoneKapers", "keystone_kapers", 14),
    ("KingKong", "king_kong", 6),
    ("Klax", "klax", 18),
    ("Koolaid", "koolaid", 9),
    ("Krull", "krull", 18),
    ("KungFuMaster", "kung_fu_master", 14),
    ("LaserGates", "laser_gates", 18),
    ("LostLuggage", "lost_luggage", 9),
    ("MarioBros", "mario_bros", 18),
    ("MiniatureGolf", "miniature_golf", 18),
    ("MontezumaRevenge", "montezuma_revenge", 18),
    ("MrDo", "mr_do", 10),
    ("MsPacman", "ms_pacman", 9),
    ("NameThisGame", "name_this_game", 6),
    ("Othello", "othello", 10),
    ("Pacman", "pacman", 5),
    ("Phoenix", "phoenix", 8),
    ("Pitfall2", "pitfall2", 18),
    ("Pitfall", "pitfall", 18),
    ("Pong", "pong", 6),
    ("Pooyan", "pooyan", 6),
    ("PrivateEye", "private_eye", 18),
    ("Qbert", "qbert", 6),
    ("Riverraid", "riverraid", 18),
    ("RoadRunner", "road_runner", 18),
    ("Robotank", "robotank", 18),
    ("Seaquest", "seaquest", 18),
    ("SirLancelot", "sir_lancelot", 6),
    ("Skiing", "skiing", 3),
    ("Solaris", "solaris", 18),
    ("SpaceInvaders", "space_invaders", 6),
    ("SpaceWar", "space_war", 18),
    ("StarGunner", "star_gunner", 18),
    ("Superman", "superman", 18),
    ("Surround", "surround", 5),
    ("Tennis", "tennis", 18),
    ("Tetris", "tetris", 5),
    ("TicTacToe3D", "tic_tac_toe_3d", 10),
    ("TimePilot", "time_pilot", 10),
    ("Trondead", "trondead", 18),
    ("Turmoil", "turmoil", 12),
    ("Tutankham", "tutankham", 8),
    ("UpNDown", "up_n_down", 6),
    ("Venture", "venture", 18),
    ("VideoCheckers", "video_checkers", 5),
    ("VideoChess", "video_chess", 10),
    ("VideoCube", "video_cube", 18),
    ("VideoPinball", "video_pinball", 9),
    ("WizardOfWor", "wizard_of_wor", 10),
    ("WordZapper", "word_zapper", 18),
    ("YarsRevenge", "yars_revenge", 18),
    ("Zaxxon", "zaxxon", 18),
)


def generate_rows() -> list[tuple[str, str, int]]:
    """The table recomputed from the installed ale-py (loads every ROM:
    a few seconds per ten games)."""
    import ale_py
    from ale_py import roms
    from ale_py.registration import rom_id_to_name

    ale = ale_py.ALEInterface()
    ale.setLoggerMode(ale_py.LoggerMode.Error)
    rows = []
    for rom in roms.get_all_rom_ids():
        if rom in MULTIPLAYER_ONLY:
            continue
        ale.loadROM(str(roms.get_rom_path(rom)))
        rows.append((rom_id_to_name(rom), rom, len(ale.getMinimalActionSet())))
    return rows
